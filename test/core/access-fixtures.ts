/**
 * Fixtures for the access policy's unit tests (access*.test.ts): policies built as the access
 * file's parser builds them (adapters/config/access-file.ts: addresses lower-case, `sees` "all"
 * for ["*"]), callers as the api key check hands them to the use cases, and fake ports that
 * record every call, so a refused trade can be shown to have reached none of them.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { expect } from "chai";

import {
  type AccessKey,
  type AccessPolicy,
  type Caller,
  type ChainQuote,
  type PricePort,
  type PriceRecord,
  type ProvenTrade,
  type QuotePort,
  type ReservedTrade,
  type Role,
  type SentTrade,
  type SignedTrade,
  type SpendingLimit,
  type TradeOnChain,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
  createUseCases,
  keyIdOf,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { CONFIG, WALLET, fakeReceipt } from "./fixtures.js";

/** One USD at LIMIT_USD_DECIMALS. */
export const USD = 10n ** 18n;
/** One token (18 decimals). */
export const TOKEN = 10n ** 18n;

/** A second exchange wallet and two more destinataries (EIP-55 test vectors), checksummed. */
export const OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB";
export const PAYEE = "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb";
export const CROOK = "0x52908400098527886E0F7030069857D2E4169EE7";

/** The SHA-256 (hex) of the `n`th key accepted under `name`: two during a rotation. */
export function hashOf(name: string, n = 1): string {
  return bytesToHex(sha256(utf8ToBytes(`${name}-secret-${n}`)));
}

/** A key as the parser builds it: one hash, the roles given, no scope, sees nothing else. */
export function accessKey(
  name: string,
  roles: Role[],
  extra: Omit<Partial<AccessKey>, "roles" | "sees"> & { sees?: string[] } = {},
): AccessKey {
  const { sees, ...rest } = extra;
  const sha256 = rest.sha256 ?? [hashOf(name)];
  return {
    name,
    sha256,
    // As the parser gives it without an "id": the first hash's.
    id: sha256[0]!.slice(0, 32),
    roles: new Set(roles),
    ...rest,
    sees: sees?.includes("*") ? "all" : new Set(sees ?? []),
  };
}

/** Lower-case sets of addresses, as the parser keeps a key's scopes. */
export function addresses(...list: string[]): ReadonlySet<string> {
  return new Set(list.map((a) => a.toLowerCase()));
}

export function policyOf(keys: AccessKey[], limits: SpendingLimit[] = [], denylist: string[] = []): AccessPolicy {
  return { version: "test", keys, limits, denylist: addresses(...denylist) };
}

/** A limit over 24 hours; `maxUsd` in whole USD. */
export function limitOf(
  name: string,
  per: SpendingLimit["per"],
  caps: { maxUsd?: bigint; maxTrades?: number; keys?: string[]; windowMs?: number; window?: string },
): SpendingLimit {
  return {
    name,
    per,
    windowMs: caps.windowMs ?? 86_400_000,
    window: caps.window ?? "24h",
    ...(caps.keys && { keys: new Set(caps.keys) }),
    ...(caps.maxUsd !== undefined && { maxUsd: caps.maxUsd }),
    ...(caps.maxTrades !== undefined && { maxTrades: caps.maxTrades }),
  };
}

/** The caller the api key check hands over for `key` sent with its `n`th hash. */
export function callerFor(key: AccessKey, n = 1): { scope: string; caller: Caller } {
  const hash = key.sha256[n - 1];
  if (hash === undefined) throw new Error(`${key.name} has no hash ${n}`);
  const id = keyIdOf(hash);
  return { scope: id, caller: { id, key } };
}

/** The USD rate the price route answers: 1.02 USD per token (8 decimals: 102000000). */
export const PRICE: PriceRecord = {
  cryptoCurrency: "TKN",
  rateForCashCurrency: { CHF: 0.91, EUR: 0.95, USD: 1.02 },
  rateWithDiscountForCashCurrency: {},
};

export class CountingPricePort implements PricePort {
  calls = 0;
  record: PriceRecord = PRICE;
  async getPrice(): Promise<PriceRecord> {
    this.calls++;
    return this.record;
  }
}

/**
 * A trade port taken one step at a time, recording each step it is asked for. A sell pays
 * `sellPayout` (the coin's base units) when set, else its tokens at `usdPerToken` (8 decimals,
 * rounded down as the swap does). `failure`, when set, is what the chain answers once the trade
 * was sent (a revert, an expiry): the trade is journalled by then, so it fails or expires.
 */
export class StepTradePort implements TradePort, QuotePort {
  /** The name of each method the use cases called, in order. */
  readonly calls: string[] = [];
  usdPerToken = 102_000_000n;
  sellPayout: bigint | undefined;
  failure: Error | undefined;
  readonly #mined = new Map<string, TransactionReceipt>();
  #nonce = 0;

  output(order: TradeOrder): bigint {
    const unit = 10n ** BigInt(order.stable.decimals);
    if (order.kind === "sell") return this.sellPayout ?? (order.amount * this.usdPerToken * unit) / (TOKEN * 10n ** 8n);
    return (order.amount * TOKEN * 10n ** 8n) / (this.usdPerToken * unit);
  }

  async quote(order: TradeOrder): Promise<ChainQuote> {
    return {
      expectedOut: this.output(order),
      price: { answer: this.usdPerToken, decimals: 8, roundId: 1n, updatedAt: 1_800_000_000 },
      gas: { units: 100_000n, estimated: true },
      gasPriceWei: 1_000_000_000n,
      nativeUsd: null,
      issues: [],
    };
  }

  async prove(order: TradeOrder): Promise<ProvenTrade> {
    this.calls.push("prove");
    return { order, output: this.output(order) };
  }

  async reserve(proven: ProvenTrade): Promise<ReservedTrade> {
    this.calls.push("reserve");
    return { proven };
  }

  async sign(reserved: ReservedTrade): Promise<SignedTrade & { order: TradeOrder }> {
    this.calls.push("sign");
    const nonce = this.#nonce++;
    const { order } = reserved.proven;
    const txHash = `0x${(nonce + 1).toString(16).padStart(64, "c")}`;
    return {
      order,
      tx: {
        wallet: order.wallet,
        nonce,
        txHash,
        rawTx: "0x02",
        maxFeePerGas: 2n,
        maxPriorityFeePerGas: 1n,
        deadline: 1,
      },
    };
  }

  async send(signed: SignedTrade): Promise<SentTrade> {
    this.calls.push("send");
    return { ...signed, submitted: true };
  }

  abandon(): void {
    this.calls.push("abandon");
  }

  async settle(sent: SentTrade): Promise<TransactionReceipt> {
    this.calls.push("settle");
    if (this.failure) throw this.failure;
    const { order } = sent as SentTrade & { order: TradeOrder };
    const receipt = { ...fakeReceipt(order), transactionHash: sent.tx.txHash };
    this.#mined.set(sent.tx.txHash, receipt);
    return receipt;
  }

  release(): void {
    this.calls.push("release");
  }

  async resolve(trade: TradeOnChain): Promise<TradeResolution> {
    const receipt = trade.broadcasts.map((b) => this.#mined.get(b.hash)).find((r) => r !== undefined);
    return receipt === undefined
      ? { state: "pending" }
      : { state: "mined", receipt, confirmations: 2, confirmed: true };
  }

  blockTimeMs(): number | undefined {
    return undefined;
  }
}

/**
 * The use cases over the memory journal (trades, quotes and the webhook outbox) and the fakes
 * above, with `policy` in force; `use(next)` swaps it, as a reload of the access file does.
 */
export function accessSetup(policy: AccessPolicy | undefined) {
  const journal = new MemoryJournal();
  const trade = new StepTradePort();
  const price = new CountingPricePort();
  let current = policy;
  const useCases = createUseCases({
    trade,
    price,
    config: CONFIG,
    journal,
    quote: trade,
    quotes: journal,
    webhooks: journal,
    wallets: [WALLET],
    policy: () => current,
  });
  return {
    journal,
    trade,
    price,
    useCases,
    use(next: AccessPolicy | undefined) {
      current = next;
    },
  };
}

/** Awaits `promise` and returns what it rejected with. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return expect.fail("expected the promise to reject");
}
