// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Address} from "@openzeppelin/contracts/utils/Address.sol";

import {MockStableCoin} from "./MockStableCoin.sol";

/**
 * @title ReentrantStableCoin
 * @notice A hostile stable coin for tests only: when armed, its `transferFrom` calls back into
 * a target (the swap) with prepared calldata, to prove the swap's reentrancy guard holds.
 */
contract ReentrantStableCoin is MockStableCoin {
    address private _target;
    bytes private _payload;

    /// @notice Deploys the coin (18 decimals), unarmed.
    constructor() MockStableCoin("Reentrant USD", "RUSD", 18) {}

    /**
     * @notice Makes the next {transferFrom} call `target` with `payload` first.
     * @param target The contract to re-enter.
     * @param payload The calldata of the re-entering call.
     */
    function arm(address target, bytes calldata payload) external {
        _target = target;
        _payload = payload;
    }

    /**
     * @notice Re-enters the armed target, bubbling up its revert (`Address.functionCall`), then
     * transfers as usual.
     * @param from Holder of the coins.
     * @param to Receiver.
     * @param value Amount.
     * @return Always true (it reverts otherwise).
     */
    function transferFrom(address from, address to, uint256 value) public override returns (bool) {
        address target = _target;
        if (target != address(0)) {
            _target = address(0);
            Address.functionCall(target, _payload);
        }
        return super.transferFrom(from, to, value);
    }
}
