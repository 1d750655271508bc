// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/**
 * @title ITradedToken
 * @notice The traded token as the swap sees it: an ERC-20 whose supply the swap mints and burns.
 */
interface ITradedToken is IERC20 {
    /**
     * @notice Creates `value` tokens for `to`. Emits {IERC20-Transfer} from the zero address.
     * @param to Receiver of the new tokens.
     * @param value Tokens to create, 18 decimals.
     */
    function mint(address to, uint256 value) external;

    /**
     * @notice Destroys `value` tokens of the caller. Emits {IERC20-Transfer} to the zero address.
     * @param value Tokens to destroy, 18 decimals.
     */
    function burn(uint256 value) external;
}
