// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/**
 * @title AggregatorV3Interface
 * @notice The read interface of a Chainlink price feed, as the swap and the service use it.
 * @dev Same function selectors and return layout as Chainlink's `AggregatorV3Interface`, so a
 * real feed can be plugged in where the mocks are used in development. It keeps Chainlink's name
 * (hence no `I` prefix), so that it reads as the interface every integration knows.
 */
interface AggregatorV3Interface { // solhint-disable-line interface-starts-with-i
    /// @notice Number of decimals of `answer` (8 for Chainlink's fiat and crypto/USD feeds).
    function decimals() external view returns (uint8);

    /// @notice Human description of the pair, e.g. "TOKEN / USD".
    function description() external view returns (string memory);

    /// @notice Version of the aggregator implementation.
    function version() external view returns (uint256);

    /**
     * @notice Data of the round `roundId`.
     * @param roundId The round.
     * @return roundId_ The round (the same).
     * @return answer The price, with {decimals} decimals.
     * @return startedAt When the round started.
     * @return updatedAt When the answer was last updated: its age is what consumers check.
     * @return answeredInRound The round in which the answer was computed (deprecated by Chainlink).
     */
    function getRoundData(
        uint80 roundId
    )
        external
        view
        returns (uint80 roundId_, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);

    /**
     * @notice Data of the latest round.
     * @return roundId The round.
     * @return answer The price, with {decimals} decimals.
     * @return startedAt When the round started.
     * @return updatedAt When the answer was last updated: its age is what consumers check.
     * @return answeredInRound The round in which the answer was computed (deprecated by Chainlink).
     */
    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
}
