/**
 * A chunk of a send-queue round made ready to send (send-queue.ts): signed with consecutive
 * nonces, then journalled all at once by each transaction's own `onSigned`.
 */
import type { NonceLedger } from "../../../core/index.js";
import { type SignOptions, signEip1559With, type SignedTransaction, type TransactionSigner } from "../tx/index.js";
import type { Queued, Signed } from "./queued.js";

/** What signing needs of the send queue: its wallet, its chain, and the wallet's nonce ledger. */
export interface SignContext {
  signer: TransactionSigner;
  chainId: bigint;
  ledger: NonceLedger;
}

/**
 * Signs `items` with consecutive nonces from `first`, then lets them all journal themselves
 * at once (one group commit in the journal). A trade whose signing or journal write fails is
 * refused and takes no nonce: those journalled after a failed write come back in `again`, to be
 * signed with the next nonces (their records are rewritten before anything of theirs is sent),
 * once the ledger has released the slot each recorded. One whose slot the ledger keeps (another
 * instance recorded a replacement there meanwhile, which may be out already) or cannot be asked
 * about is `kept`: it stays at its nonce, never signed again elsewhere (its call could then be
 * mined twice), for the lifecycle monitor to see through.
 */
export async function prepare(
  context: SignContext,
  items: readonly Queued[],
  first: number,
  refuse: (item: Queued, error: unknown) => void,
): Promise<{ ready: Signed[]; again: Queued[]; kept: Signed[] }> {
  const wallet = context.signer.address;
  const chunk = await signAll(context, items, first, refuse);
  const written = await Promise.allSettled(
    chunk.map(({ item, nonce, txHash, rawTx }) =>
      item.tx.onSigned({ wallet, nonce, txHash, rawTx, ...item.tx.fees, deadline: item.tx.deadline ?? 0 }),
    ),
  );
  const failed = written.findIndex((result) => result.status === "rejected");
  if (failed < 0) return { ready: chunk, again: [], kept: [] };
  // Every one whose journal write failed is refused (its caller has given it up); those journalled
  // after the first failure are signed again with the next nonces: the slots they recorded go first.
  const again: Queued[] = [];
  const kept: Signed[] = [];
  for (const [i, signed] of chunk.entries()) {
    if (i < failed) continue;
    const result = written[i]!;
    if (result.status === "rejected") {
      refuse(signed.item, result.reason);
      continue;
    }
    if (await released(context.ledger, wallet, signed)) again.push(signed.item);
    else kept.push(signed);
  }
  return { ready: chunk.slice(0, failed), again, kept };
}

/**
 * Whether the ledger released the slot `signed` recorded. Unanswered (the journal failing, as it
 * is on this path), the slot says: gone, it was; there still, or not to be read, it is kept.
 */
async function released(ledger: NonceLedger, wallet: string, signed: Signed): Promise<boolean> {
  try {
    return await ledger.releaseSlot(wallet, signed.nonce, signed.txHash);
  } catch {
    return ledger.slot(wallet, signed.nonce).then(
      (slot) => slot === undefined,
      () => false,
    );
  }
}

/**
 * Signs `items` with consecutive nonces from `first`, as many at once as the signer serves well
 * (`concurrency`: a remote signer's round trips overlap). A trade whose signing fails is refused
 * and takes no nonce: the next trade not yet signed takes it, and the signatures made past it are
 * kept (asked again, they are more requests to a signer that may be throttling). Only when no trade
 * is left to take a free nonce below a signed one does the trade signed at the highest nonce move
 * down into it, signed again within the budget its first signature started (its first one was
 * never journalled or sent, and is dropped).
 */
async function signAll(
  context: SignContext,
  items: readonly Queued[],
  first: number,
  refuse: (item: Queued, error: unknown) => void,
): Promise<Signed[]> {
  const width = Math.max(1, context.signer.concurrency ?? 1);
  const signed = new Map<number, Signed>();
  const startedAt = new Map<Queued, number>();
  /** Nonces of this chunk whose signing failed, lowest first. */
  const free: number[] = [];
  let next = first;
  const wave = async (asks: Array<{ item: Queued; nonce: number }>) => {
    const results = await Promise.allSettled(
      asks.map(({ item, nonce }) => {
        if (!startedAt.has(item)) startedAt.set(item, Date.now());
        return sign(context, item, nonce, { startedAt: startedAt.get(item)! });
      }),
    );
    results.forEach((result, i) => {
      const { item, nonce } = asks[i]!;
      if (result.status === "fulfilled") signed.set(nonce, { item, nonce, ...result.value });
      else {
        refuse(item, result.reason); // not sent, and its nonce goes to another
        free.push(nonce);
      }
    });
    free.sort((a, b) => a - b);
  };
  const pending = [...items];
  while (pending.length > 0)
    await wave(pending.splice(0, width).map((item) => ({ item, nonce: free.shift() ?? next++ })));
  // No trade left for the free nonces below signed ones: the highest signed move down into them.
  for (;;) {
    const tops = [...signed.keys()].sort((a, b) => b - a);
    const moves = free.filter((gap, i) => i < width && tops[i] !== undefined && gap < tops[i]!);
    if (moves.length === 0) break;
    const asks = moves.map((gap, i) => {
      const moved = signed.get(tops[i]!)!;
      signed.delete(tops[i]!);
      return { item: moved.item, nonce: gap };
    });
    free.splice(0, moves.length);
    await wave(asks);
  }
  return [...signed.values()].sort((a, b) => a.nonce - b.nonce);
}

/** One trade of the chunk, signed by the queue's wallet for its chain at `nonce`. */
function sign(context: SignContext, item: Queued, nonce: number, options: SignOptions): Promise<SignedTransaction> {
  const { to, data, gasLimit, fees } = item.tx;
  return signEip1559With(
    context.signer,
    { to, data, gasLimit, value: 0n, ...fees, chainId: context.chainId, nonce },
    options,
  );
}
