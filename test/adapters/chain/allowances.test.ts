/**
 * Allowances (adapters/chain/trade/allowances.ts) on a scripted balance and a memory journal:
 * what a check counts as unpaid, this process's trades in memory until the send queue answers
 * them, the journal's slots after, never both and never neither.
 */
import { expect } from "chai";
import { Interface, type JsonRpcApiProvider } from "ethers";

import { ERC20_ABI } from "../../../adapters/chain/index.js";
import { Allowances } from "../../../adapters/chain/trade/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import { InsufficientFundsError } from "../../../core/index.js";

const erc20 = new Interface(ERC20_ABI);
const WALLET = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const SWAP = "0x00000000000000000000000000000000000000aa";
const USDC = { address: "0x5fbdb2315678afecb367f032d93f642f64180aa3", symbol: "USDC", decimals: 6 };
/** A reservation made (the allowance covered it). */
function reserved<T>(answer: T | { short: bigint }): T {
  if (typeof answer === "object" && answer !== null && "short" in answer) throw new Error("the allowance fell short");
  return answer as T;
}
const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;

describe("Allowances", function () {
  let journal: MemoryJournal;
  let allowances: Allowances;
  /** The swap's allowance of the wallet's USDC. */
  let allowance: bigint;

  beforeEach(function () {
    journal = new MemoryJournal();
    allowance = 100n;
    // The wallet holds 100 USDC and the swap may spend `allowance` of it.
    const provider = {
      send: async (method: string, [call]: [{ data: string }]) => {
        if (method !== "eth_call") throw new Error(`not scripted: ${method}`);
        const name = erc20.parseTransaction({ data: call.data })!.name;
        if (name === "balanceOf") return `0x${(100n).toString(16)}`;
        if (name === "allowance") return `0x${allowance.toString(16)}`;
        return "0x"; // approve succeeds: not a USDT-style token
      },
    } as unknown as JsonRpcApiProvider;
    allowances = new Allowances({
      provider,
      swap: SWAP,
      reservations: (minedAfter) => journal.reservations(minedAfter),
    });
  });

  /** A trade's slot at `nonce`, journalled with its transaction `tx` and what it holds back. */
  const slot = (nonce: number, tx: number, amount: bigint) =>
    journal.recordSlot(
      {
        wallet: WALLET,
        nonce,
        purpose: "trade",
        deadline: null,
        reserves: [{ holder: WALLET, asset: USDC.address, amount }],
      },
      { hash: hash(tx), rawTx: "0x02", maxFeePerGas: 1n, maxPriorityFeePerGas: 1n, noop: false, sentAt: new Date() },
    );

  it("counts a trade in memory until the queue answers it, then by its journalled slot: once, never twice", async function () {
    const a = reserved(await allowances.reserve(WALLET, USDC, 60n, 1));
    await slot(7, 1, 60n);
    const key = allowances.journalled(hash(1));
    // 60 in memory, its slot left out: 40 left.
    const forty = reserved(await allowances.reserve(WALLET, USDC, 40n, 1));
    allowances.release([{ holding: forty.holding, amount: 40n }]);
    allowances.release([{ holding: a.holding, amount: 60n }], [key]);
    // Now its slot holds it: still 40 left, not 100, not -20.
    const refused = await allowances.reserve(WALLET, USDC, 41n, 1).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(InsufficientFundsError);
    await allowances.reserve(WALLET, USDC, 40n, 1);
  });

  it("counts another trade's slot at a nonce this process's trade was journalled at before it was freed", async function () {
    // B was journalled at nonce 7 (transaction 1), the slot freed, and B signed again elsewhere,
    // still in flight here; C was then journalled at nonce 7 (transaction 3) and answered.
    const b = reserved(await allowances.reserve(WALLET, USDC, 10n, 1));
    await slot(7, 1, 10n);
    const bKey = allowances.journalled(hash(1));
    await journal.releaseSlot(WALLET, 7, hash(1));
    await slot(7, 3, 60n);
    // At the next block: 10 (B, in memory) + 60 (C's slot): 30 left.
    const refused = await allowances.reserve(WALLET, USDC, 50n, 2).catch((error: unknown) => error);
    expect(refused, "a trade of 50 over the 30 left").to.be.instanceOf(InsufficientFundsError);
    expect(String(refused)).to.match(/holds 0\.0001 USDC \(0\.00007 already committed\)/);
    allowances.release([{ holding: b.holding, amount: 10n }], [bKey]);
  });

  it("reads again at a new head, so another instance's trades journalled since count", async function () {
    await allowances.reserve(WALLET, USDC, 10n, 1); // a read at head 1, shared by what comes at head 1
    await slot(3, 9, 80n); // another instance's trade
    const refused = await allowances.reserve(WALLET, USDC, 20n, 2).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(InsufficientFundsError);
  });

  it("tops a short allowance up once for the trades that found it short together", async function () {
    allowance = 0n;
    const [a, b] = await Promise.all([
      allowances.reserve(WALLET, USDC, 60n, 1),
      allowances.reserve(WALLET, USDC, 30n, 1),
    ]);
    expect(a).to.deep.equal({ short: 100n });
    expect(b).to.deep.equal({ short: 100n });
    let approvals = 0;
    const approve = async () => {
      approvals += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      allowance = 100n;
    };
    await Promise.all([
      allowances.topUp(WALLET, USDC, { amount: 60n, target: 100n, head: 1 }, approve),
      allowances.topUp(WALLET, USDC, { amount: 30n, target: 100n, head: 1 }, approve),
    ]);
    expect(approvals, "one approval").to.equal(1);
    reserved(await allowances.reserve(WALLET, USDC, 60n, 2));
    reserved(await allowances.reserve(WALLET, USDC, 30n, 2));
  });
});
