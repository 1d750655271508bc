/**
 * The one way a nonce gap is filled: an empty transfer from the wallet to itself (21,000 gas, no
 * value) signed at the missing nonce, recorded in the wallet's nonce ledger as a filler before it
 * is broadcast, like every other transaction, so the lifecycle monitor sees it through.
 *
 * Two callers: the send queue, when a send failed and one after it was accepted (nodes hold the
 * later one until the nonce below it is used); and the lifecycle monitor, for a nonce below the
 * highest used that the ledger holds nothing at.
 */
import type { JsonRpcApiProvider } from "ethers";

import type { NonceLedger } from "../../../core/index.js";
import type { Fees } from "../blocks/index.js";
import { signEip1559With, type TransactionSigner } from "../tx/index.js";

/** Gas of the empty transfer. */
export const FILLER_GAS = 21_000n;

export interface FillerContext {
  signer: TransactionSigner;
  chainId: bigint;
  ledger: Pick<NonceLedger, "recordSlot">;
  provider: Pick<JsonRpcApiProvider, "send">;
}

/**
 * Signs, records, then broadcasts the filler at `nonce`.
 * @returns its hash; `recorded` false when the ledger already holds the nonce (nothing was sent:
 *   whatever is there is the monitor's), `sent` false when the node did not take it (recorded:
 *   the monitor sends it again)
 */
export async function sendFiller(
  context: FillerContext,
  nonce: number,
  fees: Fees,
): Promise<{ hash: string; recorded: boolean; sent: boolean }> {
  const { signer, chainId, ledger, provider } = context;
  const wallet = signer.address;
  const { rawTx, txHash } = await signEip1559With(signer, {
    to: wallet,
    data: "0x",
    gasLimit: FILLER_GAS,
    value: 0n,
    ...fees,
    chainId,
    nonce,
  });
  const recorded = await ledger
    .recordSlot(
      { wallet, nonce, purpose: "filler", deadline: null },
      { hash: txHash, rawTx, ...fees, noop: true, sentAt: new Date() },
    )
    .then(
      () => true,
      () => false,
    );
  if (!recorded) return { hash: txHash, recorded, sent: false };
  const sent = await provider.send("eth_sendRawTransaction", [rawTx]).then(
    () => true,
    () => false,
  );
  return { hash: txHash, recorded, sent };
}
