// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title CallSimulator
/// @notice Never deployed. The service (adapters/chain/rpc/call-batcher.ts) places this runtime code,
/// through an eth_call state override, at SIMULATOR and at each exchange wallet that has a trade
/// to prove, then calls SIMULATOR.simulate: the reads and the trade proofs of a tick, in one
/// eth_call against the latest block.
/// @dev A proof runs as `wallet.forward(target, data, gas)`, so that the target sees the wallet
/// as msg.sender, inside a call that always reverts and carries the outcome out in its revert
/// data: no proof sees another's effects, each runs on the block's state as an eth_call of its
/// own would. Proofs run before the reads, and every one of them is reverted, so each finds the
/// accounts and slots it touches as cold as a transaction of its own would. At any other
/// address, and for any other caller, the code answers as an account without code does: every
/// call succeeds and returns nothing (a wallet's code must not change what a trade sees).
contract CallSimulator {
    /// @notice A static call from SIMULATOR.
    struct Read {
        address target;
        bytes data;
    }

    /// @notice A call of `target` with `data` from `from`, given exactly `gas`.
    struct Proof {
        address from;
        address target;
        bytes data;
        uint256 gas;
    }

    /// @notice A read's outcome: as the static call returned it.
    struct ReadResult {
        bool success;
        bytes returnData;
    }

    /// @notice A proof's outcome: its status, its return or revert data, and the gas it took,
    /// measured around the call (the call's own access cost included, before refunds).
    struct ProofResult {
        uint8 status;
        bytes returnData;
        uint256 gasUsed;
    }

    /// @dev Where the service places this code to call `simulate`: an address nothing is deployed
    /// at (call-batcher.ts derives the same one). The constants are internal so that, at a
    /// wallet, no getter answers where an account without code would not.
    address internal constant SIMULATOR = address(uint160(uint256(keccak256("token-service.CallSimulator"))));

    /// @dev The call reverted, or ran out of its gas.
    uint8 internal constant FAILED = 0;
    /// @dev The call returned.
    uint8 internal constant SUCCEEDED = 1;
    /// @dev The call could not run as a transaction would (too little gas left in the
    /// simulation to give it all of its own, or no simulator code at the wallet): it proves nothing.
    uint8 internal constant UNPROVEN = 2;

    /// @dev Tags the answers of `forward` and `prove`, so that an answer from anything else
    /// (an account without code answers an empty success) is never taken for a proof.
    bytes32 private constant _FORWARDED = keccak256("CallSimulator.forwarded");
    bytes32 private constant _PROVED = keccak256("CallSimulator.proved");

    /// @dev Gas `forward` keeps beyond the call's own: the calldata copy and the call's access cost.
    uint256 private constant _FORWARD_RESERVE = 20_000;

    /// @notice Accepts what an account without code accepts.
    receive() external payable {}

    /// @notice Answers any other call as an account without code does: success, nothing returned.
    fallback() external payable {}

    /// @notice Runs every proof, each on the state as it stands (reverted after), then every read.
    /// @param reads the static calls to make from SIMULATOR
    /// @param proofs the calls to make from the wallets
    /// @return readResults each read's outcome, in order
    /// @return proofResults each proof's outcome, in order
    /// @return blockNumber the number of the block the call ran on (the service checks its fees
    /// against that block's, when it is newer than the head it priced the trade from)
    function simulate(
        Read[] calldata reads,
        Proof[] calldata proofs
    ) external returns (ReadResult[] memory readResults, ProofResult[] memory proofResults, uint256 blockNumber) {
        if (address(this) != SIMULATOR) _returnNothing();
        blockNumber = block.number;
        proofResults = new ProofResult[](proofs.length);
        for (uint256 i = 0; i < proofs.length; ++i) proofResults[i] = _proofResult(proofs[i]);
        readResults = new ReadResult[](reads.length);
        for (uint256 i = 0; i < reads.length; ++i) {
            (bool success, bytes memory returnData) = reads[i].target.staticcall(reads[i].data);
            readResults[i] = ReadResult(success, returnData);
        }
    }

    /// @notice An account's native balance, read as one of the reads (a static call of SIMULATOR by
    /// itself), so that a wallet's gas money rides in the same eth_call as its token balances.
    /// @param account the account whose balance is read
    /// @return the balance, in wei
    function nativeBalance(address account) external view returns (uint256) {
        if (address(this) != SIMULATOR) _returnNothing();
        return account.balance;
    }

    /// @notice Runs one proof through its wallet, then reverts with the outcome (SIMULATOR calling itself only).
    /// @param proof the call to make from the wallet
    function prove(Proof calldata proof) external {
        if (msg.sender != address(this) || address(this) != SIMULATOR) _returnNothing();
        // solhint-disable-next-line avoid-low-level-calls
        (bool called, bytes memory answer) = proof.from.call(
            abi.encodeCall(this.forward, (proof.target, proof.data, proof.gas))
        );
        bytes memory outcome = abi.encode(_PROVED, UNPROVEN, bytes(""), uint256(0));
        if (called && _tagged(answer, _FORWARDED)) {
            (, uint8 status, bytes memory returnData, uint256 gasUsed) = abi.decode(
                answer,
                (bytes32, uint8, bytes, uint256)
            );
            outcome = abi.encode(_PROVED, status, returnData, gasUsed);
        }
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            revert(add(outcome, 32), mload(outcome))
        }
    }

    /// @notice At a wallet, for SIMULATOR: calls `target` with `data` and exactly `gas`, as the wallet.
    /// @param target the contract called
    /// @param data the calldata
    /// @param gas the gas the call gets: the transaction's limit less its intrinsic cost
    /// @return tag marks the answer as this code's
    /// @return status FAILED, SUCCEEDED or UNPROVEN
    /// @return returnData what the call returned, or its revert data
    /// @return gasUsed the gas the call took, its access cost included
    function forward(
        address target,
        bytes calldata data,
        uint256 gas
    ) external returns (bytes32 tag, uint8 status, bytes memory returnData, uint256 gasUsed) {
        if (msg.sender != SIMULATOR || address(this) == SIMULATOR) _returnNothing();
        // The call must get all of `gas`, as the transaction's would: under the 63/64 rule that
        // takes a little more here. Short of it, the call proves nothing.
        if (gasleft() < gas + gas / 63 + _FORWARD_RESERVE) return (_FORWARDED, UNPROVEN, "", 0);
        uint256 before = gasleft();
        bool success;
        // solhint-disable-next-line avoid-low-level-calls
        (success, returnData) = target.call{gas: gas}(data);
        gasUsed = before - gasleft();
        return (_FORWARDED, success ? SUCCEEDED : FAILED, returnData, gasUsed);
    }

    /// @dev Whether `answer` is an ABI encoding this code made with `tag` as its first word.
    function _tagged(bytes memory answer, bytes32 tag) private pure returns (bool) {
        return answer.length > 127 && bytes32(answer) == tag;
    }

    /// @dev Runs `proof` in a call that reverts, and reads its outcome from the revert data.
    function _proofResult(Proof calldata proof) private returns (ProofResult memory result) {
        // solhint-disable-next-line avoid-low-level-calls
        (bool returned, bytes memory answer) = address(this).call(abi.encodeCall(this.prove, (proof)));
        result.status = UNPROVEN; // ran out of gas before it could revert with its outcome
        if (!returned && _tagged(answer, _PROVED)) {
            (, result.status, result.returnData, result.gasUsed) = abi.decode(
                answer,
                (bytes32, uint8, bytes, uint256)
            );
        }
    }

    /// @dev Ends the call as a call of an account without code ends: success, no data.
    function _returnNothing() private pure {
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            return(0, 0)
        }
    }
}
