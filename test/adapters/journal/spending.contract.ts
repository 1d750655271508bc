/**
 * The spending limits' part of the journal conformance suite (journal.contract.ts runs it on
 * memory, SQLite and PostgreSQL): a trade counted against its limits with its first write, exactly
 * at the cap and one base unit over, per key, wallet, destinatary and service, over a rolling
 * window, given back by a trade that paid nothing, replaced by a sell's proven payout and then by
 * what its receipt says it paid, never past the cap when instances race for the last room, and
 * with every spend in a new limit's counter when another instance's trade is in flight beside it.
 */
import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import {
  heldEntry,
  newApproval,
  type LimitCheck,
  type NewTrade,
  type Spend,
  type SpendingLimit,
  SpendingLimitError,
  type TransactionReceipt,
} from "../../../core/index.js";

export interface SpendingContractContext {
  journal(): Journal;
  /** A second instance on the same storage when the backend allows it, else the same one. */
  peer(): Promise<Journal>;
}

const USD = 10n ** 18n;
const WALLET = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
const CUSTOMER = "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65";
const OTHER = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

function limit(overrides: Partial<SpendingLimit> = {}): SpendingLimit {
  return { name: "desk daily", per: "key", windowMs: 86_400_000, window: "24h", maxUsd: 100n * USD, ...overrides };
}

function spendOf(usd: bigint, overrides: Partial<Spend> = {}): Spend {
  return { key: "desk", wallet: WALLET, destinatary: CUSTOMER, usd, ...overrides };
}

function checksFor(spend: Spend, limits: SpendingLimit[]): LimitCheck[] {
  const value = (l: SpendingLimit) =>
    l.per === "key" ? spend.key : l.per === "wallet" ? spend.wallet : l.per === "destinatary" ? spend.destinatary : "*";
  return limits.map((l) => ({ limit: l, value: value(l) }));
}

let serial = 0;
function newTrade(overrides: Partial<NewTrade> = {}): NewTrade {
  serial += 1;
  return {
    scope: "key-id-1",
    keyName: "desk",
    idempotencyKey: null,
    requestHash: `spend-${serial}`,
    kind: "buy",
    request: { userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: WALLET },
    ...overrides,
  };
}

/** Opens a trade counted at `usd` against `limits`: its id, or the refusal. */
async function open(
  journal: Journal,
  usd: bigint,
  limits: SpendingLimit[],
  spend: Partial<Spend> = {},
  trade: Partial<NewTrade> = {},
): Promise<string | SpendingLimitError> {
  const s = spendOf(usd, spend);
  try {
    const { record } = await journal.open(newTrade(trade), { spend: s, checks: checksFor(s, limits) });
    return record.id;
  } catch (error) {
    if (error instanceof SpendingLimitError) return error;
    throw error;
  }
}

const refused = (outcome: string | SpendingLimitError) => outcome instanceof SpendingLimitError;

export function describeSpendingContract(context: SpendingContractContext): void {
  describe("spending limits", function () {
    it("admits a trade exactly at the cap and refuses one base unit more, recording nothing", async function () {
      const journal = context.journal();
      const cap = [limit()];
      expect(refused(await open(journal, 60n * USD, cap))).to.equal(false);
      const over = await open(journal, 40n * USD + 1n, cap);
      expect(over).to.be.instanceOf(SpendingLimitError);
      const message = (over as SpendingLimitError).message;
      expect(message).to.include('spending limit "desk daily"');
      expect(message).to.include("rolling 24h");
      expect(message).to.include("60 of 100 USD used");
      expect(message).to.include("40.000000000000000001 USD");
      expect((over as SpendingLimitError).limit).to.equal("desk daily");
      const page = await journal.page({ visible: "all", limit: 50 });
      expect(page.trades).to.have.length(1);
      expect(refused(await open(journal, 40n * USD, cap))).to.equal(false);
      expect(refused(await open(journal, 1n, cap))).to.equal(true);
    });

    it("keeps a held trade's room while it waits and once approved, and gives it back when it is rejected or expires", async function () {
      const journal = context.journal();
      const cap = [limit()];
      const hold = async (expiresAfterMs: number) => {
        const id = (await open(journal, 60n * USD, cap)) as string;
        const rule = { name: "large", aboveUsd: 0n, approvers: 1, expiresAfterMs, expiresAfter: "1h" };
        const approval = newApproval([rule], Date.now());
        await journal.hold(id, approval, heldEntry({ id: "key-id-1" }, id, approval));
        return id;
      };
      const decide = (id: string, verdict: "approve" | "reject") =>
        journal.decideApproval(id, verdict, { by: "approver", at: new Date().toISOString(), reason: null });
      const over = () => open(journal, 40n * USD + 1n, cap);
      const held = await hold(3_600_000);
      expect(refused(await over()), "held: its 60 USD still counted").to.equal(true);
      await decide(held, "reject");
      const admitted = await over();
      expect(refused(admitted), "rejected: its room given back").to.equal(false);
      await journal.markFailed(admitted as string, { code: "x", message: "given back" });
      const approved = await hold(3_600_000);
      await decide(approved, "approve");
      expect(refused(await over()), "approved: counted as it runs").to.equal(true);
      await journal.markFailed(approved, { code: "quote_expired", message: "nothing signed" });
      const expiring = await hold(-1);
      expect(refused(await over()), "held again: counted").to.equal(true);
      const swept = await journal.expireApprovals(new Date(), new Date(0));
      expect(swept.expired).to.deep.equal([expiring]);
      expect(refused(await over()), "expired: its room given back").to.equal(false);
    });

    it("lets exactly one of two approvals racing on two instances complete a trade, and records both of a trade needing two", async function () {
      const journal = context.journal();
      const peer = await context.peer();
      const held = async (approvers: number) => {
        const id = (await open(journal, USD, [])) as string;
        const rule = { name: "race", aboveUsd: 0n, approvers, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
        const approval = newApproval([rule], Date.now());
        await journal.hold(id, approval, heldEntry({ id: "key-id-1" }, id, approval));
        return id;
      };
      const approve = (on: Journal, id: string, by: string) =>
        on.decideApproval(id, "approve", { by, at: new Date().toISOString(), reason: null }).then(
          (decided) => decided.outcome,
          (error: unknown) => (error as Error).name,
        );
      for (let round = 0; round < 5; round++) {
        const one = await held(1);
        const outcomes = await Promise.all([approve(journal, one, "a"), approve(peer, one, "b")]);
        expect(outcomes.sort(), `round ${round}: one approves, the other is refused`).to.deep.equal([
          "TradeTransitionError",
          "approved",
        ]);
        const two = await held(2);
        const both = await Promise.all([approve(journal, two, "a"), approve(peer, two, "b")]);
        expect(both.sort(), `round ${round}: both counted, the second completes it`).to.deep.equal([
          "approved",
          "counted",
        ]);
        const after = (await journal.get(two))!;
        expect([after.status, after.approval?.approvals.map((a) => a.by).sort()]).to.deep.equal([
          "approved",
          ["a", "b"],
        ]);
      }
    });

    it("counts trades against maxTrades, exactly at the cap", async function () {
      const journal = context.journal();
      const { maxUsd: _, ...noUsd } = limit();
      const cap = [{ ...noUsd, maxTrades: 2 }];
      expect(refused(await open(journal, USD, cap))).to.equal(false);
      expect(refused(await open(journal, USD, cap))).to.equal(false);
      const third = await open(journal, USD, cap);
      expect((third as SpendingLimitError).message).to.include("2 of 2 trades used");
    });

    it("gives no Retry-After to a trade alone over the maximum", async function () {
      const journal = context.journal();
      const over = (await open(journal, 100n * USD + 1n, [limit()])) as SpendingLimitError;
      expect(over).to.be.instanceOf(SpendingLimitError);
      expect(over.retryAfterMs).to.equal(undefined);
      expect(over.message).to.include("the trade alone is over the maximum");
    });

    it("counts each key, wallet and destinatary apart, and the service as a whole", async function () {
      const journal = context.journal();
      const perKey = [limit({ maxUsd: 10n * USD })];
      expect(refused(await open(journal, 10n * USD, perKey))).to.equal(false);
      expect(refused(await open(journal, 10n * USD, perKey, { key: "other desk" }))).to.equal(false);
      expect(refused(await open(journal, USD, perKey))).to.equal(true);
      const perDestinatary = [limit({ name: "customer", per: "destinatary", maxUsd: 25n * USD })];
      // 20 already paid to CUSTOMER under the two keys: 5 left for it, any amount for another.
      expect(refused(await open(journal, 6n * USD, perDestinatary))).to.equal(true);
      expect(refused(await open(journal, 5n * USD, perDestinatary))).to.equal(false);
      expect(refused(await open(journal, 20n * USD, perDestinatary, { destinatary: OTHER }))).to.equal(false);
      const perWallet = [limit({ name: "hot wallet", per: "wallet", maxUsd: 45n * USD })];
      expect(refused(await open(journal, 1n, perWallet, { wallet: OTHER }))).to.equal(false);
      expect(refused(await open(journal, 1n, perWallet))).to.equal(true);
      const all = [limit({ name: "service", per: "all", maxUsd: 45n * USD + 1n })];
      expect(refused(await open(journal, 1n, all, { key: "third", wallet: OTHER, destinatary: OTHER }))).to.equal(true);
    });

    it("gives back the room of a trade that paid nothing, and counts it again if it paid after all", async function () {
      const journal = context.journal();
      const cap = [limit({ maxUsd: 10n * USD })];
      const first = (await open(journal, 10n * USD, cap)) as string;
      expect(refused(await open(journal, USD, cap))).to.equal(true);
      await journal.markFailed(first, { code: "trade_reverted", message: "reverted" });
      const second = await open(journal, 10n * USD, cap);
      expect(refused(second)).to.equal(false);
      await journal.discard(second as string);
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 0n, trades: 0 });
      // The failed one is found mined after all: it paid, and counts again.
      await journal.markMined(first, RECEIPT);
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 10n * USD, trades: 1 });
      expect(refused(await open(journal, 1n, cap))).to.equal(true);
      await journal.markExpired(first, { code: "trade_expired", message: "expired" });
      expect(refused(await open(journal, 10n * USD, cap))).to.equal(false);
    });

    it("replaces a count with another, checked again, and keeps the old one when it does not fit", async function () {
      const journal = context.journal();
      const cap = [limit({ maxUsd: 10n * USD })];
      const id = (await open(journal, 4n * USD, cap)) as string;
      await journal.respend(id, 9n * USD, checksFor(spendOf(0n), cap));
      expect(refused(await open(journal, USD + 1n, cap))).to.equal(true);
      expect(refused(await open(journal, USD, cap))).to.equal(false);
      let error: unknown;
      await journal.respend(id, 9n * USD + 1n, checksFor(spendOf(0n), cap)).catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 10n * USD, trades: 2 });
    });

    it("counts a sell at what its receipt says it paid once mined, in place of its proven payout", async function () {
      const journal = context.journal();
      const cap = [limit({ maxUsd: 13n * USD })];
      const use = async () => (await journal.spendingUse(checksFor(spendOf(0n), cap)))[0];
      // Proven at 12.5 DAI (18 decimals); the price rose before its block, and it paid 15.
      const sell = (await open(journal, 125n * (USD / 10n), cap, { payoutDecimals: 18 }, { kind: "sell" })) as string;
      await journal.markMined(sell, sellReceipt(10n * USD, 15n * USD));
      expect(await use()).to.deep.equal({ usd: 15n * USD, trades: 1 });
      // 12.5 + 0.5 would have fitted 13; 15 leaves no room.
      const over = (await open(journal, USD / 2n, cap)) as SpendingLimitError;
      expect(over).to.be.instanceOf(SpendingLimitError);
      expect(over.message).to.include("15 of 13 USD used");
      // Confirmed with the same receipt: counted once; a limit added later sums the payout too.
      await journal.markConfirmed(sell, sellReceipt(10n * USD, 15n * USD));
      expect(await use()).to.deep.equal({ usd: 15n * USD, trades: 1 });
      const later = { ...cap[0]!, name: "later", windowMs: 86_400_001, window: "86400001ms" };
      expect(await journal.spendingUse([{ limit: later, value: "desk" }])).to.deep.equal([
        { usd: 15n * USD, trades: 1 },
      ]);
      // A reorg, then mined again in a block where the price was lower: what it paid there.
      await journal.markReorged(sell);
      await journal.markMined(sell, sellReceipt(10n * USD, 14n * USD));
      expect(await use()).to.deep.equal({ usd: 14n * USD, trades: 1 });
    });

    it("counts a sell's payout in the coin's decimals, one that failed and was mined after all, and leaves a buy at its amount", async function () {
      const journal = context.journal();
      const cap = [limit({ maxUsd: 100n * USD })];
      const use = async () => (await journal.spendingUse(checksFor(spendOf(0n), cap)))[0];
      // Proven at 10 USDC (6 decimals), paid 9.500001: counted at 9.500001 USD, exactly.
      const usdc = (await open(journal, 10n * USD, cap, { payoutDecimals: 6 }, { kind: "sell" })) as string;
      await journal.markMined(usdc, sellReceipt(8n * USD, 9_500_001n));
      expect(await use()).to.deep.equal({ usd: 9_500_001n * 10n ** 12n, trades: 1 });
      // Failed (its room given back), then found mined, paying 6 where it was counted at 5.
      const late = (await open(journal, 5n * USD, cap, { payoutDecimals: 18 }, { kind: "sell" })) as string;
      await journal.markFailed(late, { code: "nonce_taken", message: "taken" });
      expect(await use()).to.deep.equal({ usd: 9_500_001n * 10n ** 12n, trades: 1 });
      await journal.markMined(late, sellReceipt(4n * USD, 6n * USD));
      expect(await use()).to.deep.equal({ usd: 15_500_001n * 10n ** 12n, trades: 2 });
      // A buy counts its amount, exact when accepted: its receipt's payout is tokens, not USD.
      const buy = (await open(journal, 3n * USD, cap)) as string;
      await journal.markMined(buy, sellReceipt(3n * USD, 2n * USD, "buy"));
      expect(await use()).to.deep.equal({ usd: 18_500_001n * 10n ** 12n, trades: 3 });
    });

    it("counts in a new limit's counter the trades accepted beside its creation by an instance without that limit", async function () {
      // During a reload, one instance reads the file before and another after a limit was added:
      // the first counts its trades against no limit while the second creates the limit's counters.
      const journal = context.journal();
      const before = await context.peer();
      const perCustomer = limit({ name: "per customer", per: "destinatary", maxUsd: 10n ** 30n });
      const customers = Array.from({ length: 120 }, (_, i) => `0x${(0xc000 + i).toString(16).padStart(40, "0")}`);
      await Promise.all(
        customers.flatMap((destinatary) => [
          open(before, 100n * USD, [], { destinatary }),
          open(journal, USD, [perCustomer], { destinatary }),
        ]),
      );
      const uses = await journal.spendingUse(customers.map((value) => ({ limit: perCustomer, value })));
      const short = customers.filter((_, i) => uses[i]!.usd !== 101n * USD || uses[i]!.trades !== 2);
      expect(short, "customers whose counter missed a trade").to.deep.equal([]);
    });

    it("answers a keyed retry with its record when the limit is full, counting it once", async function () {
      const journal = context.journal();
      const cap = [limit({ maxUsd: 10n * USD })];
      const trade = { idempotencyKey: "retry-1", requestHash: "same" };
      const first = await open(journal, 10n * USD, cap, {}, trade);
      const again = await open(journal, 10n * USD, cap, {}, trade);
      expect(again).to.equal(first);
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 10n * USD, trades: 1 });
    });

    it("counts over a rolling window: a trade's room comes back when it leaves it", async function () {
      const journal = context.journal();
      const cap = [limit({ windowMs: 1_500, window: "1.5s", maxUsd: 10n * USD })];
      expect(refused(await open(journal, 6n * USD, cap))).to.equal(false);
      // The first trade was accepted (by the journal's clock) before its open answered.
      const acceptedBy = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(refused(await open(journal, 4n * USD, cap))).to.equal(false);
      const asked = Date.now();
      const full = (await open(journal, 5n * USD, cap)) as SpendingLimitError;
      expect(full).to.be.instanceOf(SpendingLimitError);
      // The first trade's 6 must leave: 1.5 s after it was accepted, counted from when this refusal was asked.
      expect(full.retryAfterMs).to.be.within(1, 1_500 - (asked - acceptedBy) + 5);
      await new Promise((resolve) => setTimeout(resolve, full.retryAfterMs! + 20));
      expect(refused(await open(journal, 5n * USD, cap))).to.equal(false);
      expect(refused(await open(journal, 2n * USD, cap))).to.equal(true);
    });

    it("refuses with what the window holds, not what a counter aged a moment ago still counts", async function () {
      const journal = context.journal();
      const cap = [limit({ windowMs: 1_500, window: "1.5s", maxUsd: 10n * USD })];
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      expect(refused(await open(journal, 6n * USD, cap))).to.equal(false);
      await sleep(700);
      expect(refused(await open(journal, 3n * USD, cap))).to.equal(false);
      await sleep(600);
      expect(refused(await open(journal, USD, cap))).to.equal(false); // 10 of 10
      // The 6 leaves the window; a counter aged less than a second ago may still count it.
      await sleep(300);
      const over = (await open(journal, 8n * USD, cap)) as SpendingLimitError;
      expect(over).to.be.instanceOf(SpendingLimitError);
      expect(over.message).to.include("4 of 10 USD used, this trade counts 8 USD");
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 4n * USD, trades: 2 });
      expect(refused(await open(journal, 6n * USD, cap))).to.equal(false);
    });

    it("counts the trades already in the window for a limit added later", async function () {
      const journal = context.journal();
      await open(journal, 7n * USD, [limit({ maxUsd: 1_000n * USD })]);
      const added = [limit({ name: "new wallet limit", per: "wallet", maxUsd: 10n * USD })];
      expect((await journal.spendingUse(checksFor(spendOf(0n), added)))[0]).to.deep.equal({ usd: 7n * USD, trades: 1 });
      expect(refused(await open(journal, 3n * USD + 1n, added))).to.equal(true);
      expect(refused(await open(journal, 3n * USD, added))).to.equal(false);
    });

    it("records the spend of a trade no limit applies to, and counts it in a limit added later", async function () {
      const journal = context.journal();
      // A wallet of its own: the other tests' trades are not in this one's window.
      const wallet = "0x00000000000000000000000000000000000000c7";
      await open(journal, 7n * USD, [], { wallet });
      const added = [limit({ name: "later wallet limit", per: "wallet", maxUsd: 10n * USD })];
      const use = await journal.spendingUse([{ limit: added[0]!, value: wallet }]);
      expect(use[0]).to.deep.equal({ usd: 7n * USD, trades: 1 });
      expect(refused(await open(journal, 3n * USD + 1n, added, { wallet }))).to.equal(true);
      expect(refused(await open(journal, 3n * USD, added, { wallet }))).to.equal(false);
    });

    it("sums amounts of every length exactly, from one base unit to a hundred thousand USD", async function () {
      const journal = context.journal();
      const wallet = "0x00000000000000000000000000000000000000d8";
      const uncapped = [
        limit({ name: "exact sums", per: "wallet", windowMs: 3_600_000, window: "1h", maxUsd: 10n ** 40n }),
      ];
      let seed = 20261201n;
      let expected = 0n;
      for (let i = 0; i < 40; i++) {
        // Lengths from 1 to 24 digits: each 9-digit part boundary is crossed.
        seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
        const usd = seed % 10n ** BigInt(1 + (i % 24));
        expected += usd;
        expect(refused(await open(journal, usd, uncapped, { wallet }))).to.equal(false);
      }
      // A fresh window over the same spends sums them all at once (the counter's first sum).
      const fresh = { ...uncapped[0]!, name: "fresh", windowMs: 3_600_001, window: "3600001ms" };
      expect(await journal.spendingUse([{ limit: fresh, value: wallet }])).to.deep.equal([
        { usd: expected, trades: 40 },
      ]);
    });

    it("never lets instances racing for the last room pass the cap", async function () {
      const journal = context.journal();
      const peer = await context.peer();
      const cap = [limit({ maxUsd: 100n * USD })];
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, (_, i) => open(i % 2 === 0 ? journal : peer, 7n * USD, cap)),
      );
      const admitted = outcomes.filter((o) => !refused(o)).length;
      expect(admitted).to.equal(14); // 14 × 7 = 98 ≤ 100 < 105
      expect((await journal.spendingUse(checksFor(spendOf(0n), cap)))[0]).to.deep.equal({ usd: 98n * USD, trades: 14 });
    });

    it("names the scopes that used the most, by USD or trades, at least what each uses now", async function () {
      const journal = context.journal();
      // A window of its own, so that other tests' counters of the same journal are not among the leaders.
      const perCustomer = [limit({ name: "customer", per: "destinatary", windowMs: 7_777_000, window: "7777s" })];
      const big = "0x00000000000000000000000000000000000000b1";
      const many = "0x00000000000000000000000000000000000000b2";
      await open(journal, 50n * USD, perCustomer, { destinatary: big });
      for (let i = 0; i < 3; i++) await open(journal, 2n * USD, perCustomer, { destinatary: many });
      // 9 USD is a longer decimal text than 50 USD's only in a naive ordering: the leaders order by amount.
      await open(journal, 9n * USD, perCustomer, { destinatary: CUSTOMER });
      const byUsd = await journal.spendingLeaders("destinatary", 7_777_000, "usd", 2);
      expect(byUsd.map((l) => l.value)).to.deep.equal([big, CUSTOMER]);
      expect(byUsd[0]!.usd >= 50n * USD).to.equal(true);
      const byTrades = await journal.spendingLeaders("destinatary", 7_777_000, "trades", 1);
      expect(byTrades.map((l) => [l.value, l.trades])).to.deep.equal([[many, 3]]);
    });

    it("records the key's name and reads by name or id", async function () {
      const journal = context.journal();
      const id = (await open(journal, USD, [limit()])) as string;
      await journal.open(newTrade({ scope: "key-id-2", keyName: "viewer" }));
      expect((await journal.get(id))?.keyName).to.equal("desk");
      const byName = await journal.page({ visible: { names: ["desk"], ids: [] }, limit: 50 });
      expect(byName.trades.map((t) => t.id)).to.deep.equal([id]);
      const both = await journal.page({ visible: { names: ["viewer"], ids: ["key-id-1"] }, limit: 50 });
      expect(both.trades).to.have.length(2);
      expect((await journal.summary({ visible: { names: ["desk"], ids: [] } }))[0]?.count).to.equal(1);
    });
  });
}

const word = (n: bigint) => n.toString(16).padStart(64, "0");
/** The topics of the swap's Sold and Bought events (ITokenSwap.sol). */
const SWAP_TOPICS = {
  sell: "0x08e6c75843825654ebf8e0105264a482dca551d29d3f74f0568861868f59f3b7",
  buy: "0xf60945982f79c9cab3a44143350c7546774426e21d7e50ad46cc065e4e5b1182",
} as const;

/** RECEIPT with the swap's event (its `to` emitted it): `paidIn` for `paidOut`, in base units. */
function sellReceipt(paidIn: bigint, paidOut: bigint, kind: keyof typeof SWAP_TOPICS = "sell"): TransactionReceipt {
  const zero = `0x${"00".repeat(32)}`;
  return {
    ...RECEIPT,
    events: {
      0: {
        address: RECEIPT.to,
        blockHash: RECEIPT.blockHash,
        blockNumber: RECEIPT.blockNumber,
        logIndex: 0,
        removed: false,
        transactionHash: RECEIPT.transactionHash,
        transactionIndex: 0,
        id: "log_sold",
        returnValues: {},
        signature: null,
        raw: {
          data: `0x${word(paidIn)}${word(paidOut)}${word(150_000_000n)}`,
          topics: [SWAP_TOPICS[kind], zero, zero, zero],
        },
      },
    },
  };
}

const RECEIPT = {
  blockHash: `0x${"ab".repeat(32)}`,
  blockNumber: 7,
  contractAddress: null,
  cumulativeGasUsed: 100_000,
  effectiveGasPrice: 1_000_000_000,
  from: WALLET,
  gasUsed: 100_000,
  logsBloom: `0x${"00".repeat(256)}`,
  status: true,
  to: OTHER,
  transactionHash: `0x${"cd".repeat(32)}`,
  transactionIndex: 0,
  type: "0x2",
  events: {},
};
