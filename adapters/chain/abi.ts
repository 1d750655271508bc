/**
 * The parts of the contract suite's ABI that the service calls, as human-readable
 * fragments. They are checked against the compiled artifacts by
 * test/adapters/chain/abi.test.ts, so a contract change that breaks the service fails
 * the tests. Production mode needs no build artefacts.
 */
export const SWAP_ABI = [
  "function sell(address stable, uint256 tokenAmount, address destinatary, uint256 minStableOut, uint256 deadline) returns (uint256)",
  "function buy(address stable, uint256 stableAmount, address destinatary, uint256 minTokensOut, uint256 deadline) returns (uint256)",
  "function remit(address stable, uint256 stableAmount, address destinatary, uint256 minTokensOut, uint256 deadline) returns (uint256)",
  "function quoteSell(address stable, uint256 tokenAmount) view returns (uint256)",
  "function quoteBuy(address stable, uint256 stableAmount) view returns (uint256)",
  "function currentPrice() view returns (uint256 price, uint8 decimals)",
  "function maxPriceAge() view returns (uint256)",
  "function priceFeed() view returns (address)",
  "function isStableAllowed(address stable) view returns (bool)",
  "function token() view returns (address)",
  "function paused() view returns (bool)",
  "error SwapUnsupportedStable(address stable)",
  "error SwapUnsupportedDecimals(address stable, uint8 decimals)",
  "error SwapInvalidPrice(int256 answer)",
  "error SwapStalePrice(uint256 updatedAt, uint256 maxAge)",
  "error SwapInsufficientReserves(address stable, uint256 available, uint256 required)",
  "error SwapZeroAmount()",
  "error SwapZeroOutput()",
  "error SwapInvalidDestinatary(address destinatary)",
  "error SwapDeadlineExpired(uint256 deadline, uint256 timestamp)",
  "error SwapSlippage(uint256 amountOut, uint256 minAmountOut)",
  "error EnforcedPause()",
  "error ReentrancyGuardReentrantCall()",
  // Errors of the OpenZeppelin ERC-20s the swap moves; they bubble up through SafeERC20.
  "error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)",
  "error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed)",
  "error SafeERC20FailedOperation(address token)",
] as const;

export const ERC20_ABI = [
  "function symbol() view returns (string)",
  "function decimals() view returns (uint8)",
  "function balanceOf(address account) view returns (uint256)",
  "function allowance(address owner, address spender) view returns (uint256)",
  "function approve(address spender, uint256 value) returns (bool)",
] as const;

export const AGGREGATOR_ABI = [
  "function decimals() view returns (uint8)",
  "function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)",
] as const;
