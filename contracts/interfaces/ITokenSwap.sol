// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {AggregatorV3Interface} from "./AggregatorV3Interface.sol";
import {ITradedToken} from "./ITradedToken.sol";

/**
 * @title ITokenSwap
 * @notice The swap that trades the token against allow-listed stable coins (DAI, USDT, USDC)
 * at the price of a Chainlink-style token/USD feed, one stable-coin unit being worth one US dollar:
 * its trades, quotes, configuration, and the events and errors they emit.
 *
 * - {sell}: the caller (an exchange wallet) gives tokens, which are burnt; the destinatary
 *   receives stable coin from the swap's reserves.
 * - {buy} and {buyAndRemit}: the caller pays a USD amount in a stable coin, which joins the reserves;
 *   the destinatary receives newly minted tokens.
 *
 * Every conversion rounds down, so the caller never receives more than the exact value of what it pays.
 */
interface ITokenSwap {
    // ---------------------------------------------------------------- errors

    /// @notice `stable` is not on the allow-list.
    error SwapUnsupportedStable(address stable);
    /// @notice `stable` reports more than the swap's maximum stable-coin decimals (18).
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

    // ---------------------------------------------------------------- events

    /**
     * @notice Tokens were sold for stable coin.
     * @param seller The caller, whose tokens were burnt.
     * @param destinatary Receiver of the stable coin.
     * @param stable The stable coin paid out.
     * @param tokenAmount Tokens sold, 18 decimals.
     * @param stableAmount Stable coin paid, in its own decimals.
     * @param price The token/USD price used, with the feed's decimals.
     */
    event Sold(
        address indexed seller,
        address indexed destinatary,
        address indexed stable,
        uint256 tokenAmount,
        uint256 stableAmount,
        uint256 price
    );

    /**
     * @notice Tokens were bought with stable coin.
     * @param buyer The caller, who paid.
     * @param destinatary Receiver of the minted tokens.
     * @param stable The stable coin paid in.
     * @param stableAmount USD amount paid, in the stable coin's decimals.
     * @param tokenAmount Tokens minted, 18 decimals.
     * @param price The token/USD price used, with the feed's decimals.
     */
    event Bought(
        address indexed buyer,
        address indexed destinatary,
        address indexed stable,
        uint256 stableAmount,
        uint256 tokenAmount,
        uint256 price
    );

    /**
     * @notice A remittance: as {Bought}, for a transfer of value to a third party.
     * @param sender The caller, who paid.
     * @param destinatary Receiver of the minted tokens.
     * @param stable The stable coin paid in.
     * @param stableAmount USD amount paid, in the stable coin's decimals.
     * @param tokenAmount Tokens minted, 18 decimals.
     * @param price The token/USD price used, with the feed's decimals.
     */
    event Remitted(
        address indexed sender,
        address indexed destinatary,
        address indexed stable,
        uint256 stableAmount,
        uint256 tokenAmount,
        uint256 price
    );

    /**
     * @notice A stable coin was added to or removed from the allow-list.
     * @param stable The stable coin.
     * @param allowed Whether it can now be traded.
     */
    event StableCoinAllowListUpdated(address indexed stable, bool allowed);

    /**
     * @notice The token/USD feed changed.
     * @param previousFeed The feed until now (the zero address at deployment).
     * @param newFeed The feed from now on.
     */
    event PriceFeedUpdated(address indexed previousFeed, address indexed newFeed);

    /**
     * @notice The maximum accepted price age changed.
     * @param previousMaxAge The age until now, in seconds (zero at deployment).
     * @param newMaxAge The age from now on, in seconds.
     */
    event MaxPriceAgeUpdated(uint256 previousMaxAge, uint256 newMaxAge);

    /**
     * @notice The administrator withdrew an asset from the reserves.
     * @param asset The token withdrawn.
     * @param to Its receiver.
     * @param amount The amount, in the asset's decimals.
     */
    event ReservesWithdrawn(address indexed asset, address indexed to, uint256 amount);

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
    ) external returns (uint256 stableOut);

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
    ) external returns (uint256 tokensOut);

    /**
     * @notice A remittance: same request and result as {buy}, recorded with its own event.
     * @dev Emits three logs: stable `Transfer` caller -> swap, token `Transfer` 0 -> destinatary, {Remitted}.
     * The name sets the selector, 0x8333540b, the first after {buy}'s (0x800fe083): the dispatcher
     * compares a call's selector with the swap's in ascending order, 22 gas each, so a remittance
     * costs a buy's gas and 22. A function whose selector sorts between the two would cost every
     * remittance 22 more (docs/gas.md, "Where a trade enters the swap").
     * @param stable Allow-listed stable coin to pay with.
     * @param stableAmount USD amount in the stable coin's decimals.
     * @param destinatary Receiver of the tokens.
     * @param minTokensOut Least acceptable number of tokens (0 for none).
     * @param deadline Latest block timestamp accepted (`type(uint256).max` for none).
     * @return tokensOut Tokens minted, 18 decimals, rounded down.
     */
    function buyAndRemit(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) external returns (uint256 tokensOut);

    // ---------------------------------------------------------------- views

    /**
     * @notice Stable coin that {sell} would pay now for `tokenAmount` tokens.
     * @dev Reverts as {sell} does for an unsupported stable coin or a bad price; ignores reserves.
     * @param stable Allow-listed stable coin.
     * @param tokenAmount Tokens, 18 decimals.
     * @return stableOut Stable coin, in its own decimals, rounded down.
     */
    function quoteSell(address stable, uint256 tokenAmount) external view returns (uint256 stableOut);

    /**
     * @notice Tokens that {buy} or {buyAndRemit} would mint now for `stableAmount`.
     * @dev Reverts as {buy} does for an unsupported stable coin or a bad price.
     * @param stable Allow-listed stable coin.
     * @param stableAmount USD amount in the stable coin's decimals.
     * @return tokensOut Tokens, 18 decimals, rounded down.
     */
    function quoteBuy(address stable, uint256 stableAmount) external view returns (uint256 tokensOut);

    /**
     * @notice The checked token/USD price that trades use now.
     * @return price Answer of the feed, with `decimals` decimals.
     * @return decimals Decimals of `price`.
     */
    function currentPrice() external view returns (uint256 price, uint8 decimals);

    /**
     * @notice The traded token, which the swap mints and burns.
     * @return The token.
     */
    function token() external view returns (ITradedToken);

    /**
     * @notice The token/USD feed.
     * @return The feed.
     */
    function priceFeed() external view returns (AggregatorV3Interface);

    /**
     * @notice Oldest accepted feed answer.
     * @return Its age, in seconds.
     */
    function maxPriceAge() external view returns (uint256);

    /**
     * @notice Whether `stable` can be traded.
     * @param stable A stable coin.
     * @return Whether it is on the allow-list.
     */
    function isStableAllowed(address stable) external view returns (bool);

    // ---------------------------------------------------------------- administration

    /// @notice Stops all trades. Emits {Pausable-Paused}.
    function pause() external;

    /// @notice Resumes trading (the admin only, not a pauser). Emits {Pausable-Unpaused}.
    function unpause() external;

    /**
     * @notice Adds `stable` to, or removes it from, the allow-list.
     * @dev Caches the coin's decimals. Emits {StableCoinAllowListUpdated}.
     * @param stable The stable coin.
     * @param allowed Whether it can be traded.
     */
    function setStableAllowed(address stable, bool allowed) external;

    /**
     * @notice Replaces the token/USD feed. Emits {PriceFeedUpdated}.
     * @param newFeed The new feed; its decimals are read once, here.
     */
    function setPriceFeed(AggregatorV3Interface newFeed) external;

    /**
     * @notice Sets the oldest accepted feed answer. Emits {MaxPriceAgeUpdated}.
     * @param newMaxAge The age, in seconds; not zero.
     */
    function setMaxPriceAge(uint256 newMaxAge) external;

    /**
     * @notice Withdraws `amount` of `asset` (a reserve stable coin or any token sent here) to `to`.
     * @dev Emits the asset's `Transfer` and {ReservesWithdrawn}.
     * @param asset The token to withdraw.
     * @param to Its receiver.
     * @param amount The amount, in the asset's decimals.
     */
    function withdrawReserves(IERC20 asset, address to, uint256 amount) external;
}
