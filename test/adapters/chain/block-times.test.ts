/**
 * BlockTimes (adapters/chain/blocks/block-times.ts): the chain's block time from the heads read,
 * erring long, and the embedded chain's given one.
 */
import { expect } from "chai";

import { BlockTimes } from "../../../adapters/chain/blocks/index.js";

describe("BlockTimes", function () {
  it("knows nothing before two heads, then the time per block between them, however far apart", function () {
    const times = new BlockTimes();
    expect(times.blockTimeMs()).to.equal(undefined);
    times.record(100, 1_000);
    expect(times.blockTimeMs()).to.equal(undefined);
    times.record(164, 1_000 + 64 * 12); // read at start: 64 blocks of 12 s
    expect(times.blockTimeMs()).to.equal(12_000);
  });

  it("errs long: the larger of the recent median and the latest rate (at most twice the median)", function () {
    const times = new BlockTimes();
    let [number, timestamp] = [0, 0];
    const next = (seconds: number) => {
      number += 1;
      timestamp += seconds;
      times.record(number, timestamp);
    };
    times.record(number, timestamp);
    for (let i = 0; i < 8; i++) next(2);
    expect(times.blockTimeMs()).to.equal(2_000);
    next(6); // slower now: believed at once, up to twice the median (one missed slot)
    expect(times.blockTimeMs()).to.equal(4_000);
    next(1); // one fast block does not shorten it below the median
    expect(times.blockTimeMs()).to.equal(2_000);
    for (let i = 0; i < 5; i++) next(6); // the chain stays slower: the median follows
    expect(times.blockTimeMs()).to.equal(6_000);
  });

  it("ignores heads that are not newer than the last one (a lagging node), and a clock that went back", function () {
    const times = new BlockTimes();
    times.record(10, 100);
    times.record(12, 124);
    times.record(11, 500); // lower: ignored
    times.record(12, 900); // the same: ignored
    expect(times.blockTimeMs()).to.equal(12_000);
    times.record(13, 120); // timestamp below the last: no rate from it
    expect(times.blockTimeMs()).to.equal(12_000);
  });

  it("answers the block time it is given without measuring: the embedded chain's automine is 0", function () {
    const times = new BlockTimes(0);
    times.record(1, 0);
    times.record(2, 60); // a quiet minute between two trades, not a one-minute block
    expect(times.blockTimeMs()).to.equal(0);
  });
});
