/**
 * The outside-transaction detector across a reorg (issue 40 review): a block it counted a wallet's
 * transaction in, replaced by one without it (the transaction back in the mempool, mined again a
 * block later), must not count that transaction twice; else the wallet's nonce is taken for one
 * higher than it is, and an outside transaction at the next nonce, seen by the wallet's nonce
 * while the service is idle, is taken for nothing new. On fakes of the node and the journal.
 */
import { expect } from "chai";
import type { JsonRpcApiProvider } from "ethers";

import type { RpcReceipt } from "../../../adapters/chain/blocks/index.js";
import { OutsideDetector, type OutsideContext } from "../../../adapters/chain/watch/index.js";
import type { OutsideTransaction, WatchedNonce } from "../../../core/index.js";

const WALLET = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const OURS = `0x${"a1".repeat(32)}`;
const LEAKED = `0x${"b2".repeat(32)}`;
const CUSTOMER = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

const receipt = (hash: string, block: number): RpcReceipt =>
  ({ from: WALLET, transactionHash: hash, blockNumber: `0x${block.toString(16)}` }) as unknown as RpcReceipt;

function detector(blocks: Map<number, Array<{ hash: string; nonce: number }>>) {
  const recorded: OutsideTransaction[] = [];
  const saved: WatchedNonce[] = [];
  const head = () => Math.max(...blocks.keys());
  const provider = {
    async send(method: string, params: unknown[]) {
      if (method !== "eth_getBlockByNumber") throw new Error(`unexpected ${method}`);
      const number = params[0] === "latest" ? head() : Number(params[0]);
      const txs = blocks.get(number);
      if (txs === undefined) return null;
      return {
        number: `0x${number.toString(16)}`,
        transactions: txs.map((tx) => ({
          hash: tx.hash,
          from: WALLET,
          to: CUSTOMER,
          nonce: `0x${tx.nonce.toString(16)}`,
          value: "0x1",
          blockNumber: `0x${number.toString(16)}`,
        })),
      };
    },
  } as unknown as JsonRpcApiProvider;
  const context: OutsideContext = {
    provider,
    chainId: 31337,
    wallets: [WALLET],
    policy: "alert",
    log: { error() {}, warn() {}, info() {} },
    expects: (hash) => hash === OURS,
    walletState: () => ({ wallet: WALLET }),
    paused: async () => {},
    journal: {
      async unknownTransactions(_wallet: string, hashes: readonly string[]) {
        return hashes.filter((hash) => hash !== OURS);
      },
      // Nonce 5 is the service's own trade, mined as OURS.
      async slot(_wallet: string, nonce: number) {
        if (nonce !== 5) return undefined;
        return { wallet: WALLET, nonce, broadcasts: [{ hash: OURS }], mined: { hash: OURS } } as never;
      },
      async recordOutsideTransaction(tx: OutsideTransaction) {
        if (recorded.some((r) => r.nonce === tx.nonce)) return false;
        recorded.push(tx);
        return true;
      },
      async watchedNonce() {
        return undefined;
      },
      async saveWatchedNonce(_wallet: string, at: WatchedNonce) {
        saved.push(at);
      },
    } as unknown as OutsideContext["journal"],
  };
  return { watch: new OutsideDetector(context), recorded, saved };
}

describe("the outside-transaction detector across a reorg", function () {
  it("does not count twice a trade a reorg put back in the mempool: an outside transaction at the next nonce is still found", async function () {
    // Block 11 mined our trade (nonce 5); a reorg replaced it by an empty 11', and 12 mined the
    // trade again; 13, while idle, mined a transfer signed outside at nonce 6.
    const blocks = new Map<number, Array<{ hash: string; nonce: number }>>([
      [10, []],
      [11, []],
      [12, [{ hash: OURS, nonce: 5 }]],
      [13, [{ hash: LEAKED, nonce: 6 }]],
    ]);
    const { watch, recorded } = detector(blocks);
    watch.onNonces(new Map([[WALLET, 5]]), 10);
    await watch.idle();
    watch.onBlock({ number: 11 }, [receipt(OURS, 11)]);
    watch.onBlock({ number: 11 }, []); // the reorg's 11'
    watch.onBlock({ number: 12 }, [receipt(OURS, 12)]);
    await watch.idle();
    // Idle from here: only the wallet's nonce tells of block 13.
    expect(watch.needsNonces(13)).to.equal(true);
    watch.onNonces(new Map([[WALLET, 7]]), 13);
    await watch.idle();
    expect(recorded.map((tx) => [tx.nonce, tx.hash])).to.deep.equal([[6, LEAKED]]);
  });

  it("counts each block of one chain once, and a block re-read as it was changes nothing", async function () {
    const blocks = new Map<number, Array<{ hash: string; nonce: number }>>([[12, []]]);
    const { watch, recorded } = detector(blocks);
    watch.onNonces(new Map([[WALLET, 5]]), 10);
    await watch.idle();
    watch.onBlock({ number: 11 }, [receipt(OURS, 11)]);
    watch.onBlock({ number: 12 }, []);
    await watch.idle();
    // Nonce 6 is next: nothing outside, and no nonce reading is due.
    expect(watch.needsNonces(12)).to.equal(false);
    watch.onNonces(new Map([[WALLET, 6]]), 12);
    await watch.idle();
    expect(recorded).to.deep.equal([]);
  });
});
