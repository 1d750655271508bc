/**
 * What a failed send means, found out before anything of it is given up (the send queue's
 * rounds, send-queue.ts): its hashes are looked up on every endpoint (tx-evidence.ts), and a
 * nonce found taken is looked at again a second later before its trade may be signed again.
 */
import type { JsonRpcApiProvider } from "ethers";

import { DomainError, TransactionRefusedError, type NonceLedger, type NonceSlot } from "../../../core/index.js";
import type { RpcReceipt } from "../blocks/index.js";
import { isPlainRefusal, isReplacementUnderpriced, nodeMessage, toDomainError } from "../rpc/index.js";
import type { TransactionSigner } from "../tx/index.js";
import type { Outcome, Queued, Signed } from "./queued.js";
import { lookUpOwn } from "./tx-evidence.js";

/**
 * What a send's outcome means once a failure was looked up (verify): accepted after all;
 * `pending` (nobody can say it went nowhere: it keeps its slot); `taken` (another transaction
 * was mined at its nonce, twice over: it is signed again past it); `held` (another transaction
 * holds its nonce in the pools, unmined); `refused` (a plain refusal of a transaction no endpoint
 * knows); or never tried.
 */
export type Verified =
  | { accepted: true; receipt: RpcReceipt | null }
  | { pending: true }
  | { taken: true }
  | { held: true }
  | { refused: true; error: Error }
  | { unsent: true };

/** How long after a nonce was found taken it is looked up again, before its trade is signed again. */
const TAKEN_RECHECK_MS = 1_000;

/** What the look-ups need of the send queue: its provider, its wallet and the wallet's nonce ledger. */
export interface LookUpContext {
  provider: JsonRpcApiProvider;
  signer: TransactionSigner;
  ledger: NonceLedger;
}

/**
 * What each failed send means, found out before anything of it is given up: every hash the
 * ledger holds at its nonce is looked up on every endpoint (tx-evidence.ts).
 * - Mined or known somewhere: accepted after all. The answer was lost on the way, or "nonce
 *   too low" / "already known" / "underpriced" came for this very transaction. Its receipt is
 *   then waited for from the service's own endpoint, not taken from whichever one had it.
 * - Taken: every endpoint answered, none knows its hashes, and one has mined past its nonce.
 *   Looked up again a second later (takenAgain): still so, and the trade was not signed again
 *   before, it is `taken` (the slot goes and the trade is signed once more, at a nonce past it);
 *   otherwise `pending`, and the verdict is the lifecycle monitor's after several looks.
 * - "Replacement transaction underpriced" for the first and only transaction the ledger holds
 *   at its nonce, which every endpoint answered it does not know, while none has mined past the
 *   nonce: `held`. Someone else's transaction (the wallet's key used elsewhere) holds the nonce in
 *   the pools; the send queue waits until it is mined, then signs the trade again past it.
 * - A plain refusal (isPlainRefusal: the wallet cannot pay the gas, the gas fits no block…)
 *   of a transaction that every endpoint answered it does not know: `refused`, and the trade
 *   fails with nothing paid.
 * - Anything else, an endpoint that did not answer included: `pending`. The trade keeps its
 *   slot and its bytes; the lifecycle monitor sees it through.
 */
export async function verify(
  context: LookUpContext,
  signed: readonly Signed[],
  outcomes: readonly Outcome[],
  onTaken: (nonce: number) => void,
): Promise<Verified[]> {
  const { provider, signer, ledger } = context;
  return Promise.all(
    outcomes.map(async (outcome, i): Promise<Verified> => {
      if (!("error" in outcome)) return outcome;
      const { nonce, txHash } = signed[i]!;
      const slot = await ledger.slot(signer.address, nonce).catch(() => undefined);
      const hashes = slot?.broadcasts.map((b) => b.hash) ?? [txHash];
      const evidence = await lookUpOwn(provider, signer.address, nonce, hashes.length > 0 ? hashes : [txHash]);
      switch (evidence.state) {
        case "mined":
        case "known":
          return { accepted: true, receipt: null };
        case "taken":
          onTaken(nonce);
          return takenAgain(context, nonce, hashes, signed[i]!.item);
        case "absent":
          if (outcome.definite && isPlainRefusal(outcome.error))
            return { refused: true, error: refusal(outcome.error) };
          // The ledger holds this transaction alone at the nonce (its first broadcast), so the
          // transaction the node would not replace is someone else's.
          if (outcome.definite && isReplacementUnderpriced(outcome.error) && onlyOwn(slot, txHash))
            return { held: true };
          return { pending: true };
        case "unknown":
          return { pending: true };
      }
    }),
  );
}

/** Whether the ledger holds `hash` and nothing else at the slot. */
function onlyOwn(slot: NonceSlot | undefined, hash: string): boolean {
  return (
    slot !== undefined && slot.broadcasts.length === 1 && slot.broadcasts[0]!.hash.toLowerCase() === hash.toLowerCase()
  );
}

/**
 * Whether a nonce found taken by another transaction is still taken on a second look a second
 * later, across every endpoint: only then may its trade be signed again, once, at a later
 * nonce (a wallet someone else used, the stored next nonce stale). A load-balanced endpoint
 * can answer the count from a node at the head and the receipt from one behind, so one look
 * could take our own mined transaction for another; a second trade found taken, or a second
 * look that says otherwise, leaves the verdict to the lifecycle monitor.
 */
async function takenAgain(
  context: LookUpContext,
  nonce: number,
  hashes: readonly string[],
  item: Queued,
): Promise<Verified> {
  if (item.retried) return { pending: true };
  await new Promise((resolve) => setTimeout(resolve, TAKEN_RECHECK_MS));
  const again = await lookUpOwn(context.provider, context.signer.address, nonce, hashes);
  if (again.state === "mined" || again.state === "known") return { accepted: true, receipt: null };
  return again.state === "taken" ? { taken: true } : { pending: true };
}

/** A node's definite refusal of a transaction no endpoint knows, as the trade's error: nothing was paid. */
function refusal(error: Error): Error {
  const mapped = toDomainError(error);
  return mapped instanceof DomainError ? mapped : new TransactionRefusedError(nodeMessage(error));
}
