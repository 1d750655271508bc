// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";

/**
 * @title SwapMath
 * @notice Conversions between token amounts (18 decimals) and stable-coin amounts at a
 * USD price with `priceDecimals` decimals. Both round down, so the caller never receives
 * more than the exact value: rounding is always in the swap's favour.
 */
library SwapMath {
    uint256 internal constant TOKEN_UNIT = 1e18;

    /// @dev stableOut = tokenAmount * price * 10^stableDecimals / (10^18 * 10^priceDecimals), rounded down.
    function tokensToStable(
        uint256 tokenAmount,
        uint256 price,
        uint8 priceDecimals,
        uint8 stableDecimals
    ) internal pure returns (uint256) {
        return Math.mulDiv(tokenAmount, price * 10 ** stableDecimals, TOKEN_UNIT * 10 ** priceDecimals);
    }

    /// @dev tokensOut = stableAmount * 10^18 * 10^priceDecimals / (price * 10^stableDecimals), rounded down.
    function stableToTokens(
        uint256 stableAmount,
        uint256 price,
        uint8 priceDecimals,
        uint8 stableDecimals
    ) internal pure returns (uint256) {
        return Math.mulDiv(stableAmount, TOKEN_UNIT * 10 ** priceDecimals, price * 10 ** stableDecimals);
    }
}
