// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Metadata} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Metadata.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";

import {AggregatorV3Interface} from "./interfaces/AggregatorV3Interface.sol";
import {ITradedToken} from "./interfaces/ITradedToken.sol";
import {SwapMath} from "./libraries/SwapMath.sol";

/**
 * @title TokenSwap
 * @notice Trades the token against allow-listed stable coins (DAI, USDT, USDC) at the price of a
 * Chainlink-style token/USD feed. One stable-coin unit is valued at one US dollar.
 *
 * - {sell}: the caller (an exchange wallet) gives tokens, which are burnt; the destinatary
 *   receives stable coin from the swap's reserves.
 * - {buy} and {remit}: the caller pays a USD amount in a stable coin, which joins the reserves;
 *   the destinatary receives newly minted tokens.
 *
 * Rounding: every conversion rounds down (see {SwapMath}), so the caller never receives more
 * than the exact value of what it pays.
 *
 * Logs of a trade transaction, in order:
 * - sell, five logs: (0) token `Approval` (the caller's allowance to the swap, decremented),
 *   (1) token `Transfer` caller -> swap, (2) token `Transfer` swap -> 0 (burn),
 *   (3) stable-coin `Transfer` swap -> destinatary, (4) {Sold}.
 *   Log (0) is emitted when the caller's allowance is finite; an infinite allowance is not
 *   decremented and leaves four logs.
 * - buy and remit, three logs: (0) stable-coin `Transfer` caller -> swap,
 *   (1) token `Transfer` 0 -> destinatary (mint), (2) {Bought} or {Remitted}.
 */
contract TokenSwap is Ownable, Pausable, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @notice Highest stable-coin decimals the conversions accept.
    uint8 public constant MAX_STABLE_DECIMALS = 18;

    /// @notice The traded token. The swap must be its minter.
    ITradedToken public immutable token;

    AggregatorV3Interface private _priceFeed;
    uint8 private _priceDecimals;
    uint256 private _maxPriceAge;
    mapping(address stable => bool) private _allowed;
    mapping(address stable => uint8) private _stableDecimals;

    /// @notice `stable` is not on the allow-list.
    error SwapUnsupportedStable(address stable);
    /// @notice `stable` reports more than {MAX_STABLE_DECIMALS} decimals.
    error SwapUnsupportedDecimals(address stable, uint8 decimals);
    /// @notice The feed answered zero or a negative price.
    error SwapInvalidPrice(int256 answer);
    /// @notice The feed's answer was updated at `updatedAt`, longer than `maxAge` seconds ago (or in the future).
    error SwapStalePrice(uint256 updatedAt, uint256 maxAge);
    /// @notice The swap holds `available` of `stable`, less than the `required` payout.
    error SwapInsufficientReserves(address stable, uint256 available, uint256 required);
    /// @notice The trade amount is zero.
    error SwapZeroAmount();
    /// @notice The amount is too small to be worth one base unit of what it buys.
    error SwapZeroOutput();
    /// @notice `destinatary` is the zero address.
    error SwapInvalidDestinatary(address destinatary);
    /// @notice The trade was submitted after `deadline` (now is `timestamp`).
    error SwapDeadlineExpired(uint256 deadline, uint256 timestamp);
    /// @notice The trade would give `amountOut`, less than the caller's `minAmountOut`.
    error SwapSlippage(uint256 amountOut, uint256 minAmountOut);
    /// @notice `feed` is not a usable price feed (the zero address).
    error SwapInvalidFeed(address feed);
    /// @notice A maximum price age of zero would reject every price.
    error SwapInvalidMaxPriceAge(uint256 maxAge);

    /// @notice `seller` sold `tokenAmount` tokens for `stableAmount` of `stable`, paid to `destinatary`, at `price`.
    event Sold(
        address indexed seller,
        address indexed destinatary,
        address indexed stable,
        uint256 tokenAmount,
        uint256 stableAmount,
        uint256 price
    );
    /// @notice `buyer` paid `stableAmount` of `stable` for `tokenAmount` tokens minted to `destinatary`, at `price`.
    event Bought(
        address indexed buyer,
        address indexed destinatary,
        address indexed stable,
        uint256 stableAmount,
        uint256 tokenAmount,
        uint256 price
    );
    /// @notice A remittance: as {Bought}, for a transfer of value to a third party.
    event Remitted(
        address indexed sender,
        address indexed destinatary,
        address indexed stable,
        uint256 stableAmount,
        uint256 tokenAmount,
        uint256 price
    );
    /// @notice `stable` was added to (`allowed`) or removed from the allow-list.
    event StableCoinAllowListUpdated(address indexed stable, bool allowed);
    /// @notice The token/USD feed changed.
    event PriceFeedUpdated(address indexed previousFeed, address indexed newFeed);
    /// @notice The maximum accepted price age changed.
    event MaxPriceAgeUpdated(uint256 previousMaxAge, uint256 newMaxAge);
    /// @notice The owner withdrew `amount` of `asset` from the reserves to `to`.
    event ReservesWithdrawn(address indexed asset, address indexed to, uint256 amount);

    /**
     * @param token_ The traded token; the swap must be made its minter after deployment.
     * @param priceFeed_ Token/USD feed.
     * @param maxPriceAge_ Oldest accepted feed answer, in seconds.
     * @param stables Stable coins allowed at deployment (DAI, USDT, USDC).
     * @param initialOwner Administrator.
     */
    constructor(
        ITradedToken token_,
        AggregatorV3Interface priceFeed_,
        uint256 maxPriceAge_,
        address[] memory stables,
        address initialOwner
    ) Ownable(initialOwner) {
        token = token_;
        _setPriceFeed(priceFeed_);
        _setMaxPriceAge(maxPriceAge_);
        for (uint256 i = 0; i < stables.length; ++i) {
            _setStableAllowed(stables[i], true);
        }
    }

    // ---------------------------------------------------------------- trades

    /**
     * @notice Sells `tokenAmount` tokens of the caller for stable coin paid to `destinatary`.
     * @dev The caller must have approved the swap for `tokenAmount` tokens. Emits five logs:
     * token `Approval` (when the allowance is finite), token `Transfer` caller -> swap,
     * token `Transfer` swap -> 0, stable `Transfer` swap -> destinatary, {Sold}.
     * @param stable Allow-listed stable coin to pay out.
     * @param tokenAmount Tokens to sell, 18 decimals.
     * @param destinatary Receiver of the stable coin.
     * @param minStableOut Least acceptable payout (0 for none).
     * @param deadline Latest block timestamp accepted (`type(uint256).max` for none).
     * @return stableOut Stable coin paid, in its own decimals, rounded down.
     */
    function sell(
        address stable,
        uint256 tokenAmount,
        address destinatary,
        uint256 minStableOut,
        uint256 deadline
    ) external nonReentrant whenNotPaused returns (uint256 stableOut) {
        _checkTrade(stable, tokenAmount, destinatary, deadline);
        uint256 price = _currentPrice();
        stableOut = SwapMath.tokensToStable(tokenAmount, price, _priceDecimals, _stableDecimals[stable]);
        _checkOutput(stableOut, minStableOut);
        uint256 reserves = IERC20(stable).balanceOf(address(this));
        if (reserves < stableOut) revert SwapInsufficientReserves(stable, reserves, stableOut);

        IERC20(address(token)).safeTransferFrom(msg.sender, address(this), tokenAmount);
        token.burn(tokenAmount);
        IERC20(stable).safeTransfer(destinatary, stableOut);
        emit Sold(msg.sender, destinatary, stable, tokenAmount, stableOut, price);
    }

    /**
     * @notice Buys tokens for `destinatary` with `stableAmount` (a USD amount) of the caller's stable coin.
     * @dev The caller must have approved the swap for `stableAmount`. Emits three logs:
     * stable `Transfer` caller -> swap, token `Transfer` 0 -> destinatary, {Bought}.
     * @param stable Allow-listed stable coin to pay with.
     * @param stableAmount USD amount in the stable coin's decimals.
     * @param destinatary Receiver of the tokens.
     * @param minTokensOut Least acceptable number of tokens (0 for none).
     * @param deadline Latest block timestamp accepted (`type(uint256).max` for none).
     * @return tokensOut Tokens minted, 18 decimals, rounded down.
     */
    function buy(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) external nonReentrant whenNotPaused returns (uint256 tokensOut) {
        uint256 price;
        (tokensOut, price) = _buy(stable, stableAmount, destinatary, minTokensOut, deadline);
        emit Bought(msg.sender, destinatary, stable, stableAmount, tokensOut, price);
    }

    /**
     * @notice A remittance: same request and result as {buy}, recorded with its own event.
     * @dev Emits three logs: stable `Transfer` caller -> swap, token `Transfer` 0 -> destinatary, {Remitted}.
     * @param stable Allow-listed stable coin to pay with.
     * @param stableAmount USD amount in the stable coin's decimals.
     * @param destinatary Receiver of the tokens.
     * @param minTokensOut Least acceptable number of tokens (0 for none).
     * @param deadline Latest block timestamp accepted (`type(uint256).max` for none).
     * @return tokensOut Tokens minted, 18 decimals, rounded down.
     */
    function remit(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) external nonReentrant whenNotPaused returns (uint256 tokensOut) {
        uint256 price;
        (tokensOut, price) = _buy(stable, stableAmount, destinatary, minTokensOut, deadline);
        emit Remitted(msg.sender, destinatary, stable, stableAmount, tokensOut, price);
    }

    // ---------------------------------------------------------------- views

    /**
     * @notice Stable coin that {sell} would pay now for `tokenAmount` tokens.
     * @dev Reverts as {sell} does for an unsupported stable coin or a bad price; ignores reserves.
     */
    function quoteSell(address stable, uint256 tokenAmount) external view returns (uint256) {
        if (!_allowed[stable]) revert SwapUnsupportedStable(stable);
        return SwapMath.tokensToStable(tokenAmount, _currentPrice(), _priceDecimals, _stableDecimals[stable]);
    }

    /**
     * @notice Tokens that {buy} or {remit} would mint now for `stableAmount`.
     * @dev Reverts as {buy} does for an unsupported stable coin or a bad price.
     */
    function quoteBuy(address stable, uint256 stableAmount) external view returns (uint256) {
        if (!_allowed[stable]) revert SwapUnsupportedStable(stable);
        return SwapMath.stableToTokens(stableAmount, _currentPrice(), _priceDecimals, _stableDecimals[stable]);
    }

    /**
     * @notice The checked token/USD price that trades use now.
     * @return price Answer of the feed, with `decimals` decimals.
     * @return decimals Decimals of `price`.
     */
    function currentPrice() external view returns (uint256 price, uint8 decimals) {
        return (_currentPrice(), _priceDecimals);
    }

    /// @notice The token/USD feed.
    function priceFeed() external view returns (AggregatorV3Interface) {
        return _priceFeed;
    }

    /// @notice Oldest accepted feed answer, in seconds.
    function maxPriceAge() external view returns (uint256) {
        return _maxPriceAge;
    }

    /// @notice Whether `stable` can be traded.
    function isStableAllowed(address stable) external view returns (bool) {
        return _allowed[stable];
    }

    // ---------------------------------------------------------------- administration

    /// @notice Stops all trades. Owner only. Emits {Pausable-Paused}.
    function pause() external onlyOwner {
        _pause();
    }

    /// @notice Resumes trading. Owner only. Emits {Pausable-Unpaused}.
    function unpause() external onlyOwner {
        _unpause();
    }

    /**
     * @notice Adds `stable` to, or removes it from, the allow-list. Owner only.
     * @dev Caches the coin's decimals. Emits {StableCoinAllowListUpdated}.
     */
    function setStableAllowed(address stable, bool allowed) external onlyOwner {
        _setStableAllowed(stable, allowed);
    }

    /// @notice Replaces the token/USD feed. Owner only. Emits {PriceFeedUpdated}.
    function setPriceFeed(AggregatorV3Interface newFeed) external onlyOwner {
        _setPriceFeed(newFeed);
    }

    /// @notice Sets the oldest accepted feed answer, in seconds. Owner only. Emits {MaxPriceAgeUpdated}.
    function setMaxPriceAge(uint256 newMaxAge) external onlyOwner {
        _setMaxPriceAge(newMaxAge);
    }

    /**
     * @notice Withdraws `amount` of `asset` (a reserve stable coin or any token sent here) to `to`. Owner only.
     * @dev Emits the asset's `Transfer` and {ReservesWithdrawn}.
     */
    function withdrawReserves(IERC20 asset, address to, uint256 amount) external onlyOwner nonReentrant {
        asset.safeTransfer(to, amount);
        emit ReservesWithdrawn(address(asset), to, amount);
    }

    // ---------------------------------------------------------------- internals

    function _buy(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) private returns (uint256 tokensOut, uint256 price) {
        _checkTrade(stable, stableAmount, destinatary, deadline);
        price = _currentPrice();
        tokensOut = SwapMath.stableToTokens(stableAmount, price, _priceDecimals, _stableDecimals[stable]);
        _checkOutput(tokensOut, minTokensOut);

        IERC20(stable).safeTransferFrom(msg.sender, address(this), stableAmount);
        token.mint(destinatary, tokensOut);
    }

    function _checkTrade(address stable, uint256 amount, address destinatary, uint256 deadline) private view {
        if (block.timestamp > deadline) revert SwapDeadlineExpired(deadline, block.timestamp);
        if (!_allowed[stable]) revert SwapUnsupportedStable(stable);
        if (destinatary == address(0)) revert SwapInvalidDestinatary(destinatary);
        if (amount == 0) revert SwapZeroAmount();
    }

    function _checkOutput(uint256 amountOut, uint256 minAmountOut) private pure {
        if (amountOut == 0) revert SwapZeroOutput();
        if (amountOut < minAmountOut) revert SwapSlippage(amountOut, minAmountOut);
    }

    function _currentPrice() private view returns (uint256) {
        (, int256 answer, , uint256 updatedAt, ) = _priceFeed.latestRoundData();
        if (answer <= 0) revert SwapInvalidPrice(answer);
        if (updatedAt > block.timestamp || block.timestamp - updatedAt > _maxPriceAge) {
            revert SwapStalePrice(updatedAt, _maxPriceAge);
        }
        return uint256(answer);
    }

    function _setStableAllowed(address stable, bool allowed) private {
        if (allowed) {
            uint8 decimals = IERC20Metadata(stable).decimals();
            if (decimals > MAX_STABLE_DECIMALS) revert SwapUnsupportedDecimals(stable, decimals);
            _stableDecimals[stable] = decimals;
        }
        _allowed[stable] = allowed;
        emit StableCoinAllowListUpdated(stable, allowed);
    }

    function _setPriceFeed(AggregatorV3Interface newFeed) private {
        if (address(newFeed) == address(0)) revert SwapInvalidFeed(address(newFeed));
        address previous = address(_priceFeed);
        _priceFeed = newFeed;
        _priceDecimals = newFeed.decimals();
        emit PriceFeedUpdated(previous, address(newFeed));
    }

    function _setMaxPriceAge(uint256 newMaxAge) private {
        if (newMaxAge == 0) revert SwapInvalidMaxPriceAge(newMaxAge);
        uint256 previous = _maxPriceAge;
        _maxPriceAge = newMaxAge;
        emit MaxPriceAgeUpdated(previous, newMaxAge);
    }
}
