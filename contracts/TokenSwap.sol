// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Metadata} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Metadata.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControlDefaultAdminRules} from
    "@openzeppelin/contracts/access/extensions/AccessControlDefaultAdminRules.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {AggregatorV3Interface} from "./interfaces/AggregatorV3Interface.sol";
import {ITokenSwap} from "./interfaces/ITokenSwap.sol";
import {ITradedToken} from "./interfaces/ITradedToken.sol";
import {SwapMath} from "./libraries/SwapMath.sol";

/**
 * @title TokenSwap
 * @notice Trades the token against allow-listed stable coins at the price of a Chainlink-style
 * token/USD feed: see {ITokenSwap}.
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
 * - buy and buyAndRemit (a remittance), three logs: (0) stable-coin `Transfer` caller -> swap,
 *   (1) token `Transfer` 0 -> destinatary (mint), (2) {Bought} or {Remitted}.
 * Access control only reads roles during a trade; it adds no log.
 *
 * @dev Access control, as OpenZeppelin's guidelines have it:
 * - `DEFAULT_ADMIN_ROLE`, held by one account ({AccessControlDefaultAdminRules}): configures the
 *   swap (allow-list, feed, maximum price age), withdraws reserves, and grants and revokes
 *   {PAUSER_ROLE}. It is handed over in two steps, {beginDefaultAdminTransfer} then
 *   {acceptDefaultAdminTransfer} by the new admin once the admin delay has passed: the role-based
 *   counterpart of `Ownable2Step`, so a mistyped address cannot take the swap over. {owner}
 *   (ERC-5313) names the admin.
 * - {PAUSER_ROLE}: {pause} and {unpause}. Kept apart from the admin so that a monitoring key can
 *   stop trading at once without holding the power to reconfigure the swap or move its reserves.
 *   The deployment grants it to the admin.
 * The swap must hold the token's `MINTER_ROLE` (see {TradedToken}) to mint on {buy} and burn on {sell}.
 */
contract TokenSwap is ITokenSwap, AccessControlDefaultAdminRules, Pausable, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice The role allowed to {pause} and {unpause}.
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    /// @notice Highest stable-coin decimals the conversions accept.
    uint8 public constant MAX_STABLE_DECIMALS = 18;

    /// @inheritdoc ITokenSwap
    ITradedToken public immutable token;

    /**
     * @dev What every trade reads of the swap's own settings, in one storage slot (one cold read
     * per trade): the feed, its decimals, the maximum price age and the pause flag.
     */
    struct Settings {
        AggregatorV3Interface priceFeed;
        uint8 priceDecimals;
        uint40 maxPriceAge;
        bool paused;
    }

    /// @dev A stable coin's settings, in one slot: whether it is allowed, and its cached decimals.
    struct StableSettings {
        bool allowed;
        uint8 decimals;
    }

    Settings private _settings;
    mapping(address stable => StableSettings) private _stables;

    /**
     * @notice Deploys the swap; its admin must then grant {PAUSER_ROLE}, and the token's admin the token's
     * `MINTER_ROLE` to the swap.
     * @param token_ The traded token.
     * @param priceFeed_ Token/USD feed.
     * @param maxPriceAge_ Oldest accepted feed answer, in seconds.
     * @param stables Stable coins allowed at deployment (DAI, USDT, USDC).
     * @param initialAdminDelay Seconds a new admin must wait before accepting the role (see {defaultAdminDelay}).
     * @param initialAdmin The admin (`DEFAULT_ADMIN_ROLE`).
     */
    constructor(
        ITradedToken token_,
        AggregatorV3Interface priceFeed_,
        uint256 maxPriceAge_,
        address[] memory stables,
        uint48 initialAdminDelay,
        address initialAdmin
    ) AccessControlDefaultAdminRules(initialAdminDelay, initialAdmin) {
        token = token_;
        token_.totalSupply(); // reverts unless token_ holds code: {_callToken} relies on it
        _setPriceFeed(priceFeed_);
        _setMaxPriceAge(maxPriceAge_);
        for (uint256 i = 0; i < stables.length; ++i) {
            _setStableAllowed(stables[i], true);
        }
    }

    // ---------------------------------------------------------------- trades

    /// @inheritdoc ITokenSwap
    function sell(
        address stable,
        uint256 tokenAmount,
        address destinatary,
        uint256 minStableOut,
        uint256 deadline
    ) external nonReentrant returns (uint256 stableOut) {
        Settings memory settings = _settings;
        uint8 stableDecimals = _checkTrade(settings, stable, tokenAmount, destinatary, deadline);
        uint256 price = _currentPrice(settings);
        stableOut = SwapMath.tokensToStable(tokenAmount, price, settings.priceDecimals, stableDecimals);
        _checkOutput(stableOut, minStableOut);

        IERC20(address(token)).safeTransferFrom(msg.sender, address(this), tokenAmount);
        _callToken(abi.encodeCall(ITradedToken.burn, (tokenAmount)));
        // The reserves are checked only when the payout fails: the transfer reads the same balance.
        if (!IERC20(stable).trySafeTransfer(destinatary, stableOut)) {
            uint256 reserves = IERC20(stable).balanceOf(address(this));
            if (reserves < stableOut) revert SwapInsufficientReserves(stable, reserves, stableOut);
            revert SafeERC20.SafeERC20FailedOperation(stable);
        }
        emit Sold(msg.sender, destinatary, stable, tokenAmount, stableOut, price);
    }

    /// @inheritdoc ITokenSwap
    function buy(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) external nonReentrant returns (uint256 tokensOut) {
        uint256 price;
        (tokensOut, price) = _buy(stable, stableAmount, destinatary, minTokensOut, deadline);
        emit Bought(msg.sender, destinatary, stable, stableAmount, tokensOut, price);
    }

    /// @inheritdoc ITokenSwap
    function buyAndRemit(
        address stable,
        uint256 stableAmount,
        address destinatary,
        uint256 minTokensOut,
        uint256 deadline
    ) external nonReentrant returns (uint256 tokensOut) {
        uint256 price;
        (tokensOut, price) = _buy(stable, stableAmount, destinatary, minTokensOut, deadline);
        emit Remitted(msg.sender, destinatary, stable, stableAmount, tokensOut, price);
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc ITokenSwap
    function quoteSell(address stable, uint256 tokenAmount) external view returns (uint256 stableOut) {
        Settings memory settings = _settings;
        StableSettings memory coin = _stables[stable];
        if (!coin.allowed) revert SwapUnsupportedStable(stable);
        return SwapMath.tokensToStable(tokenAmount, _currentPrice(settings), settings.priceDecimals, coin.decimals);
    }

    /// @inheritdoc ITokenSwap
    function quoteBuy(address stable, uint256 stableAmount) external view returns (uint256 tokensOut) {
        Settings memory settings = _settings;
        StableSettings memory coin = _stables[stable];
        if (!coin.allowed) revert SwapUnsupportedStable(stable);
        return SwapMath.stableToTokens(stableAmount, _currentPrice(settings), settings.priceDecimals, coin.decimals);
    }

    /// @inheritdoc ITokenSwap
    function currentPrice() external view returns (uint256 price, uint8 decimals) {
        Settings memory settings = _settings;
        return (_currentPrice(settings), settings.priceDecimals);
    }

    /// @inheritdoc ITokenSwap
    function priceFeed() external view returns (AggregatorV3Interface) {
        return _settings.priceFeed;
    }

    /// @inheritdoc ITokenSwap
    function maxPriceAge() external view returns (uint256) {
        return _settings.maxPriceAge;
    }

    /// @inheritdoc ITokenSwap
    function isStableAllowed(address stable) external view returns (bool) {
        return _stables[stable].allowed;
    }

    /**
     * @notice Whether trading is stopped (see {pause}).
     * @dev Kept in the trades' settings slot rather than {Pausable}'s own, so a trade reads it with the feed.
     * @return Whether the swap is paused.
     */
    function paused() public view override returns (bool) {
        return _settings.paused;
    }

    // ---------------------------------------------------------------- administration

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires {PAUSER_ROLE}.
     */
    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires `DEFAULT_ADMIN_ROLE`: stopping is fast (any pauser), resuming deliberate (the
     * admin), so a pauser's key cannot undo a stop the admin decided.
     */
    function unpause() external onlyRole(DEFAULT_ADMIN_ROLE) {
        _unpause();
    }

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires `DEFAULT_ADMIN_ROLE`.
     */
    function setStableAllowed(address stable, bool allowed) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setStableAllowed(stable, allowed);
    }

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires `DEFAULT_ADMIN_ROLE`.
     */
    function setPriceFeed(AggregatorV3Interface newFeed) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setPriceFeed(newFeed);
    }

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires `DEFAULT_ADMIN_ROLE`.
     */
    function setMaxPriceAge(uint256 newMaxAge) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMaxPriceAge(newMaxAge);
    }

    /**
     * @inheritdoc ITokenSwap
     * @dev Requires `DEFAULT_ADMIN_ROLE`.
     */
    function withdrawReserves(
        IERC20 asset,
        address to,
        uint256 amount
    ) external onlyRole(DEFAULT_ADMIN_ROLE) nonReentrant {
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
        Settings memory settings = _settings;
        uint8 stableDecimals = _checkTrade(settings, stable, stableAmount, destinatary, deadline);
        price = _currentPrice(settings);
        tokensOut = SwapMath.stableToTokens(stableAmount, price, settings.priceDecimals, stableDecimals);
        _checkOutput(tokensOut, minTokensOut);

        IERC20(stable).safeTransferFrom(msg.sender, address(this), stableAmount);
        _callToken(abi.encodeCall(ITradedToken.mint, (destinatary, tokensOut)));
    }

    /**
     * @dev Calls the token's `mint` or `burn` (which return nothing), bubbling up its revert. The
     * constructor proved the token holds code, so Solidity's code-size check before a call could
     * never fail: it would only cost gas.
     */
    function _callToken(bytes memory data) private {
        // solhint-disable-next-line avoid-low-level-calls
        (bool success, bytes memory returndata) = address(token).call(data);
        if (!success) {
            // solhint-disable-next-line no-inline-assembly
            assembly ("memory-safe") {
                revert(add(returndata, 0x20), mload(returndata))
            }
        }
    }

    /// @dev The checks of every trade, pause included ({whenNotPaused}'s); returns the coin's decimals.
    function _checkTrade(
        Settings memory settings,
        address stable,
        uint256 amount,
        address destinatary,
        uint256 deadline
    ) private view returns (uint8 stableDecimals) {
        if (settings.paused) revert EnforcedPause();
        if (block.timestamp > deadline) revert SwapDeadlineExpired(deadline, block.timestamp);
        StableSettings memory coin = _stables[stable];
        if (!coin.allowed) revert SwapUnsupportedStable(stable);
        if (destinatary == address(0)) revert SwapInvalidDestinatary(destinatary);
        if (amount == 0) revert SwapZeroAmount();
        return coin.decimals;
    }

    function _checkOutput(uint256 amountOut, uint256 minAmountOut) private pure {
        if (amountOut == 0) revert SwapZeroOutput();
        if (amountOut < minAmountOut) revert SwapSlippage(amountOut, minAmountOut);
    }

    function _currentPrice(Settings memory settings) private view returns (uint256) {
        (, int256 answer, , uint256 updatedAt, ) = settings.priceFeed.latestRoundData();
        if (answer < 1) revert SwapInvalidPrice(answer); // zero or negative
        if (updatedAt > block.timestamp || block.timestamp - updatedAt > settings.maxPriceAge) {
            revert SwapStalePrice(updatedAt, settings.maxPriceAge);
        }
        return uint256(answer);
    }

    /// @dev Sets the pause flag in the settings slot; {Pausable}'s own flag is never used.
    function _pause() internal override whenNotPaused {
        _settings.paused = true;
        emit Paused(_msgSender());
    }

    /// @dev Clears the pause flag in the settings slot.
    function _unpause() internal override whenPaused {
        _settings.paused = false;
        emit Unpaused(_msgSender());
    }

    function _setStableAllowed(address stable, bool allowed) private {
        StableSettings storage coin = _stables[stable];
        if (allowed) {
            uint8 decimals = IERC20Metadata(stable).decimals();
            if (decimals > MAX_STABLE_DECIMALS) revert SwapUnsupportedDecimals(stable, decimals);
            coin.decimals = decimals;
        }
        coin.allowed = allowed;
        emit StableCoinAllowListUpdated(stable, allowed);
    }

    function _setPriceFeed(AggregatorV3Interface newFeed) private {
        if (address(newFeed) == address(0)) revert SwapInvalidFeed(address(newFeed));
        address previous = address(_settings.priceFeed);
        _settings.priceFeed = newFeed;
        _settings.priceDecimals = newFeed.decimals();
        emit PriceFeedUpdated(previous, address(newFeed));
    }

    /// @dev Ages above `type(uint40).max` seconds (about 34,800 years) are refused like zero: they would not fit the slot.
    function _setMaxPriceAge(uint256 newMaxAge) private {
        if (newMaxAge == 0 || newMaxAge > type(uint40).max) revert SwapInvalidMaxPriceAge(newMaxAge);
        uint256 previous = _settings.maxPriceAge;
        _settings.maxPriceAge = uint40(newMaxAge);
        emit MaxPriceAgeUpdated(previous, newMaxAge);
    }
}
