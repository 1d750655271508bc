// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MockStableCoin} from "./MockStableCoin.sol";

/**
 * @title ReentrantStableCoin
 * @notice A hostile stable coin for tests only: when armed, its `transferFrom` calls back into
 * a target (the swap) with prepared calldata, to prove the swap's reentrancy guard holds.
 */
contract ReentrantStableCoin is MockStableCoin {
    address private _target;
    bytes private _payload;

    constructor() MockStableCoin("Reentrant USD", "RUSD", 18) {}

    /// @notice Makes the next {transferFrom} call `target` with `payload` first.
    function arm(address target, bytes calldata payload) external {
        _target = target;
        _payload = payload;
    }

    /// @notice Re-enters the armed target, bubbling up its revert, then transfers as usual.
    function transferFrom(address from, address to, uint256 value) public override returns (bool) {
        address target = _target;
        if (target != address(0)) {
            _target = address(0);
            (bool ok, bytes memory result) = target.call(_payload);
            if (!ok) {
                assembly ("memory-safe") {
                    revert(add(result, 0x20), mload(result))
                }
            }
        }
        return super.transferFrom(from, to, value);
    }
}
