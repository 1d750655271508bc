import { expect } from "chai";
import { network } from "hardhat";

import { SNAPSHOT_GAS_USED, tradeGasLimit } from "../../adapters/chain/trade/index.js";
import {
  COINS,
  DESTINATARIES,
  GROWTH_TOLERANCE,
  KINDS,
  compareGas,
  gasKey,
  measureGas,
  readSnapshot,
} from "../../scripts/gas.js";

describe("the gas snapshot (gas-snapshot.json, npm run gas)", function () {
  it("holds every trade's gas: none grew past 0.5%, none shrank without the snapshot being updated", async function () {
    const snapshot = readSnapshot();
    expect(snapshot, "gas-snapshot.json is missing: npm run gas -- --update").to.not.equal(undefined);
    const measured = await measureGas(network);
    const { grew, shrank } = compareGas(snapshot!, measured);
    expect(grew, `gas grew past ${GROWTH_TOLERANCE * 100}% (snapshot -> now):\n${grew.join("\n")}`).to.deep.equal([]);
    expect(
      shrank,
      `gas changed; update the snapshot with npm run gas -- --update:\n${shrank.join("\n")}`,
    ).to.deep.equal([]);
  });

  it("measures sell, buy and remittance with each coin, to a fresh destinatary and to one seen before", function () {
    const keys = KINDS.flatMap((kind) => COINS.flatMap((coin) => DESTINATARIES.map((d) => gasKey(kind, coin, d))));
    expect(Object.keys(readSnapshot() ?? {})).to.deep.equal(keys);
  });

  it("bounds the service's gas limits: each kind's figure in gas-limits.ts is at least the snapshot's highest", function () {
    const snapshot = readSnapshot() ?? {};
    for (const kind of KINDS) {
      const highest = Math.max(...COINS.map((coin) => snapshot[gasKey(kind, coin, "fresh")] ?? 0));
      expect(
        Number(SNAPSHOT_GAS_USED[kind]),
        `${kind}: update SNAPSHOT_GAS_USED in adapters/chain/trade/gas-limits.ts`,
      ).to.be.at.least(highest);
      expect(tradeGasLimit(kind)).to.equal((SNAPSHOT_GAS_USED[kind] * 3n) / 2n);
    }
  });

  describe("the comparison", function () {
    it("fails a figure that grew by more than 0.5%, naming the old and new figures", function () {
      expect(compareGas({ a: 100_000 }, { a: 100_501 }).grew).to.deep.equal(["a: 100000 -> 100501 (+0.50%)"]);
      expect(compareGas({ a: 100_000 }, { a: 100_500 })).to.deep.equal({ grew: [], shrank: [] });
    });

    it("asks for an update when a figure shrank, or is new or gone", function () {
      expect(compareGas({ a: 100_000 }, { a: 99_000 }).shrank).to.deep.equal(["a: 100000 -> 99000 (-1.00%)"]);
      expect(compareGas({ a: 1 }, { b: 1 }).shrank).to.deep.equal([
        "b: not in the snapshot (now 1)",
        "a: no longer measured",
      ]);
    });
  });
});
