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
 * - buy and remit, three logs: (0) stable-coin `Transfer` caller -> swap,
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

    AggregatorV3Interface private _priceFeed;
    uint8 private _priceDecimals;
    uint256 private _maxPriceAge;
    mapping(address stable => bool) private _allowed;
    mapping(address stable => uint8) private _stableDecimals;

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

    /// @inheritdoc ITokenSwap
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

    /// @inheritdoc ITokenSwap
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

    /// @inheritdoc ITokenSwap
    function quoteSell(address stable, uint256 tokenAmount) external view returns (uint256 stableOut) {
        if (!_allowed[stable]) revert SwapUnsupportedStable(stable);
        return SwapMath.tokensToStable(tokenAmount, _currentPrice(), _priceDecimals, _stableDecimals[stable]);
    }

    /// @inheritdoc ITokenSwap
    function quoteBuy(address stable, uint256 stableAmount) external view returns (uint256 tokensOut) {
        if (!_allowed[stable]) revert SwapUnsupportedStable(stable);
        return SwapMath.stableToTokens(stableAmount, _currentPrice(), _priceDecimals, _stableDecimals[stable]);
    }

    /// @inheritdoc ITokenSwap
    function currentPrice() external view returns (uint256 price, uint8 decimals) {
        return (_currentPrice(), _priceDecimals);
    }

    /// @inheritdoc ITokenSwap
    function priceFeed() external view returns (AggregatorV3Interface) {
        return _priceFeed;
    }

    /// @inheritdoc ITokenSwap
    function maxPriceAge() external view returns (uint256) {
        return _maxPriceAge;
    }

    /// @inheritdoc ITokenSwap
    function isStableAllowed(address stable) external view returns (bool) {
        return _allowed[stable];
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
        if (answer < 1) revert SwapInvalidPrice(answer); // zero or negative
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
