// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/**
 * @title AggregatorV3Interface
 * @notice The read interface of a Chainlink price feed, as the swap and the service use it.
 * @dev Same function selectors and return layout as Chainlink's `AggregatorV3Interface`, so a
 * real feed can be plugged in where the mocks are used in development.
 */
interface AggregatorV3Interface {
    /// @notice Number of decimals of `answer` (8 for Chainlink's fiat and crypto/USD feeds).
    function decimals() external view returns (uint8);

    /// @notice Human description of the pair, e.g. "TOKEN / USD".
    function description() external view returns (string memory);

    /// @notice Version of the aggregator implementation.
    function version() external view returns (uint256);

    /// @notice Data of the round `roundId`.
    function getRoundData(
        uint80 roundId
    )
        external
        view
        returns (uint80 roundId_, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);

    /// @notice Data of the latest round.
    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
}
