// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/**
 * @title MockStableCoin
 * @notice A stable coin for development and tests (DAI with 18 decimals, USDC with 6).
 * Anyone can mint: it is a faucet, never deploy it where value matters.
 * @dev Like the real DAI and USDC, {transferFrom} does not emit `Approval` (OpenZeppelin v5 default).
 */
contract MockStableCoin is ERC20 {
    uint8 private immutable _decimals;

    /**
     * @notice Deploys the coin with no supply.
     * @param name_ Token name, e.g. "Dai Stablecoin".
     * @param symbol_ Token symbol, e.g. "DAI".
     * @param decimals_ Decimals of the real coin (18 for DAI, 6 for USDT and USDC).
     */
    constructor(string memory name_, string memory symbol_, uint8 decimals_) ERC20(name_, symbol_) {
        _decimals = decimals_;
    }

    /// @notice Decimals given at deployment.
    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    /**
     * @notice Mints `value` to `to`. Open to anyone. Emits {IERC20-Transfer} from the zero address.
     * @param to Receiver.
     * @param value Amount, in the coin's decimals.
     */
    function mint(address to, uint256 value) external {
        _mint(to, value);
    }
}
