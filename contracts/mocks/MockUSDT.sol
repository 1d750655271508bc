// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MockStableCoin} from "./MockStableCoin.sol";

/**
 * @title MockUSDT
 * @notice Tether USD for development and tests: 6 decimals and mainnet USDT's approve quirk.
 * @dev Mainnet USDT reverts, without a reason, when an allowance is changed from a non-zero
 * value to another non-zero value (`require(!((_value != 0) && (allowed[msg.sender][_spender] != 0)))`).
 * Integrations must first set the allowance to zero. This mock reverts the same way.
 */
contract MockUSDT is MockStableCoin {
    constructor() MockStableCoin("Tether USD", "USDT", 6) {}

    /**
     * @notice Approves `spender` for `value`, but only from or to a zero allowance.
     * @dev Reverts without a reason when both the current allowance and `value` are non-zero.
     * Emits {IERC20-Approval}.
     * @param spender The account allowed to spend.
     * @param value The allowance.
     * @return Always true (it reverts otherwise).
     */
    function approve(address spender, uint256 value) public override returns (bool) {
        // Empty revert data, as mainnet USDT's `require` without a message: no reason, no custom error.
        // solhint-disable-next-line reason-string, gas-custom-errors
        if (value != 0 && allowance(msg.sender, spender) != 0) revert();
        return super.approve(spender, value);
    }
}
