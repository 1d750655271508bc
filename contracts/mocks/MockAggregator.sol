// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AggregatorV3Interface} from "../interfaces/AggregatorV3Interface.sol";

/**
 * @title MockAggregator
 * @notice A settable Chainlink-style price feed for development and tests.
 * Anyone can set the answer: never deploy it where value matters.
 */
contract MockAggregator is AggregatorV3Interface {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
    }

    uint8 private immutable _decimals;
    string private _description;
    uint80 private _latestRound;
    mapping(uint80 roundId => Round) private _rounds;

    /// @notice Round `roundId` has no data.
    error MockAggregatorNoData(uint80 roundId);

    /**
     * @notice A new answer was posted (same shape as Chainlink's `AnswerUpdated`).
     * @param current The answer.
     * @param roundId Its round.
     * @param updatedAt Its update time.
     */
    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    /**
     * @notice Deploys the feed and posts its first round.
     * @param decimals_ Decimals of the answer (8 like Chainlink's USD feeds).
     * @param description_ Pair name, e.g. "EUR / USD".
     * @param initialAnswer First answer, posted at deployment.
     */
    constructor(uint8 decimals_, string memory description_, int256 initialAnswer) {
        _decimals = decimals_;
        _description = description_;
        _post(initialAnswer, block.timestamp, block.timestamp);
    }

    /// @inheritdoc AggregatorV3Interface
    function decimals() external view returns (uint8) {
        return _decimals;
    }

    /// @inheritdoc AggregatorV3Interface
    function description() external view returns (string memory) {
        return _description;
    }

    /// @inheritdoc AggregatorV3Interface
    function version() external pure returns (uint256) {
        return 4;
    }

    /// @inheritdoc AggregatorV3Interface
    function getRoundData(
        uint80 roundId
    ) external view returns (uint80, int256, uint256, uint256, uint80) {
        Round storage round = _rounds[roundId];
        if (round.updatedAt == 0) revert MockAggregatorNoData(roundId);
        return (roundId, round.answer, round.startedAt, round.updatedAt, roundId);
    }

    /// @inheritdoc AggregatorV3Interface
    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        Round storage round = _rounds[_latestRound];
        return (_latestRound, round.answer, round.startedAt, round.updatedAt, _latestRound);
    }

    /**
     * @notice Posts `answer` as a new round updated now. Emits {AnswerUpdated}.
     * @param answer The price, with the feed's decimals.
     */
    function updateAnswer(int256 answer) external {
        _post(answer, block.timestamp, block.timestamp);
    }

    /**
     * @notice Posts a new round with explicit timestamps, e.g. an old `updatedAt` to make the feed stale.
     * Emits {AnswerUpdated}.
     * @param answer The price, with the feed's decimals.
     * @param updatedAt The round's update time.
     * @param startedAt The round's start time.
     */
    function updateRoundData(int256 answer, uint256 updatedAt, uint256 startedAt) external {
        _post(answer, updatedAt, startedAt);
    }

    function _post(int256 answer, uint256 updatedAt, uint256 startedAt) private {
        uint80 roundId = ++_latestRound;
        _rounds[roundId] = Round(answer, startedAt, updatedAt);
        emit AnswerUpdated(answer, roundId, updatedAt);
    }
}
