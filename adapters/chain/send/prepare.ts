/**
 * A chunk of a send-queue round made ready to send (send-queue.ts): signed with consecutive
 * nonces, then journalled all at once by each transaction's own `onSigned`.
 */
import type { NonceLedger } from "../../../core/index.js";
import type { Fees } from "../blocks/index.js";
import { signEip1559With, type SignedTransaction, type TransactionSigner } from "../tx/index.js";
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
 * signed with the next nonces (their records are rewritten before anything of theirs is sent).
 */
export async function prepare(
  context: SignContext,
  items: readonly Queued[],
  first: number,
  refuse: (item: Queued, error: unknown) => void,
): Promise<{ ready: Signed[]; again: Queued[] }> {
  const wallet = context.signer.address;
  const chunk = await signAll(context, items, first, refuse);
  const written = await Promise.allSettled(
    chunk.map(({ item, nonce, txHash, rawTx }) =>
      item.tx.onSigned({ wallet, nonce, txHash, rawTx, ...item.tx.fees, deadline: item.tx.deadline ?? 0 }),
    ),
  );
  const failed = written.findIndex((result) => result.status === "rejected");
  if (failed < 0) return { ready: chunk, again: [] };
  // Every one whose journal write failed is refused (its caller has given it up); those journalled
  // after the first failure are signed again with the next nonces: the slots they recorded go first.
  const again: Queued[] = [];
  for (const [i, { item, nonce, txHash }] of chunk.entries()) {
    if (i < failed) continue;
    const result = written[i]!;
    if (result.status === "rejected") {
      refuse(item, result.reason);
      continue;
    }
    await context.ledger.releaseSlot(wallet, nonce, txHash).catch(() => {});
    again.push(item);
  }
  return { ready: chunk.slice(0, failed), again };
}

/**
 * Signs `items` with consecutive nonces from `first`, as many at once as the signer serves well
 * (`concurrency`: a remote signer's round trips overlap). A trade whose signing fails is refused
 * and takes no nonce: the ones signed after it in the same wave, at the nonces past it, are signed
 * again one nonce lower (their first signatures were never journalled or sent, and are dropped).
 */
async function signAll(
  context: SignContext,
  items: readonly Queued[],
  first: number,
  refuse: (item: Queued, error: unknown) => void,
): Promise<Signed[]> {
  const width = Math.max(1, context.signer.concurrency ?? 1);
  const chunk: Signed[] = [];
  const pending = [...items];
  while (pending.length > 0) {
    const wave = pending.splice(0, width);
    const base = first + chunk.length;
    const results = await Promise.allSettled(
      wave.map((item, i) =>
        sign(
          context,
          { to: item.tx.to, data: item.tx.data, gasLimit: item.tx.gasLimit, value: 0n },
          base + i,
          item.tx.fees,
        ),
      ),
    );
    const again: Queued[] = [];
    results.forEach((result, i) => {
      const item = wave[i]!;
      const nonce = first + chunk.length;
      if (result.status === "rejected")
        refuse(item, result.reason); // not sent, and its nonce goes to the next one
      else if (base + i === nonce) chunk.push({ item, nonce, ...result.value });
      else again.push(item); // signed past a nonce now free: signed again at the right one
    });
    pending.unshift(...again);
  }
  return chunk;
}

/** One transaction of the chunk, signed by the queue's wallet for its chain. */
function sign(
  context: SignContext,
  tx: { to: string; data: string; gasLimit: bigint; value: bigint },
  nonce: number,
  fees: Fees,
): Promise<SignedTransaction> {
  return signEip1559With(context.signer, { ...tx, ...fees, chainId: context.chainId, nonce });
}
