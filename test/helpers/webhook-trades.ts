/** Trades driven through their states in a journal, as the trade pipeline and the lifecycle monitor do. */
import type { Journal } from "../../adapters/journal/index.js";
import type { TradeRequest, TransactionReceipt } from "../../core/index.js";

export const WEBHOOK_SCOPE = "0123456789abcdef0123456789abcdef";

const REQUEST: TradeRequest = {
  userAddress: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
  destinatary: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
  amount: "12.5",
  usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
};

let serial = 0;
const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;

export function receiptFor(txHash: string, blockNumber = 42): TransactionReceipt {
  return {
    blockHash: hash(10_000 + blockNumber),
    blockNumber,
    contractAddress: null,
    cumulativeGasUsed: 21_000,
    effectiveGasPrice: 1_000_000_000,
    from: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    gasUsed: 21_000,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512",
    transactionHash: txHash,
    transactionIndex: 0,
    type: "0x2",
    events: {},
  } as unknown as TransactionReceipt;
}

/** A trade of `scope`, opened and signed at a fresh nonce of `wallet`; returns its id and first hash. */
export async function signedTrade(
  journal: Journal,
  scope = WEBHOOK_SCOPE,
  wallet = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
): Promise<{ id: string; txHash: string; wallet: string; nonce: number }> {
  serial += 1;
  const nonce = serial;
  const { record } = await journal.open({
    scope,
    idempotencyKey: null,
    requestHash: `h${serial}`,
    kind: "sell",
    request: REQUEST,
  });
  const txHash = hash(serial * 1000);
  await journal.markSigned(record.id, {
    wallet,
    nonce,
    txHash,
    rawTx: `0x02${serial.toString(16)}`,
    maxFeePerGas: 2_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
    deadline: Math.floor(Date.now() / 1000) + 300,
  });
  return { id: record.id, txHash, wallet, nonce };
}

/** A replacement at the trade's nonce (a fee bump); returns its hash. */
export async function replaceTrade(
  journal: Journal,
  trade: { wallet: string; nonce: number },
  bump: number,
): Promise<string> {
  const txHash = hash(trade.nonce * 1000 + bump);
  const last = (await journal.slot(trade.wallet, trade.nonce))!.broadcasts.at(-1)!.hash;
  const recorded = await journal.recordBroadcast(
    trade.wallet,
    trade.nonce,
    {
      hash: txHash,
      rawTx: `0x02ff${bump}`,
      maxFeePerGas: 4_000_000_000n * BigInt(bump),
      maxPriorityFeePerGas: 2_000_000_000n,
      noop: false,
      sentAt: new Date(),
    },
    last,
  );
  if (!recorded) throw new Error("the ledger refused the replacement");
  return txHash;
}

/** submitted → replaced → confirmed: the three events of a trade re-priced once. */
export async function runTrade(journal: Journal, scope = WEBHOOK_SCOPE): Promise<string> {
  const trade = await signedTrade(journal, scope);
  await journal.markSubmitted(trade.id);
  const replacement = await replaceTrade(journal, trade, 1);
  await journal.markConfirmed(trade.id, receiptFor(replacement));
  return trade.id;
}

/**
 * Two trades of the webhook scope, each with its events (registered by `instance-a`), and one
 * attempt at each trade's first: one delivered, the other to be tried again in a minute.
 * Returns the delivered one's trade id.
 */
export async function attemptedEvents(journal: Journal): Promise<string> {
  await journal.registerWebhookScopes("instance-a", [WEBHOOK_SCOPE], 60_000);
  const delivered = await runTrade(journal);
  await runTrade(journal);
  for (const head of await journal.claimWebhookEvents("a", new Map([[WEBHOOK_SCOPE, 2]]), 60_000)) {
    const ok = head.tradeId === delivered;
    await journal.recordWebhookAttempt(
      head.id,
      "a",
      { at: new Date(), statusCode: ok ? 204 : 503, error: ok ? null : "answered HTTP 503" },
      ok ? { status: "delivered" } : { status: "pending", nextAttemptAt: new Date(Date.now() + 60_000) },
    );
  }
  return delivered;
}
