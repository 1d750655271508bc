/**
 * Sending for one exchange wallet: the send queue (nonce assignment, signing, journalling and
 * ordered batches, group-committed), the look-up that decides what a failed send means
 * (tx-evidence.ts), and the no-op that fills a nonce gap (filler.ts). It builds on tx/, rpc/
 * and blocks/; the lifecycle monitor and the trade adapter use it.
 */
export { FILLER_GAS, sendFiller, type FillerContext } from "./filler.js";
export type { Outgoing, Sent } from "./queued.js";
export { SendQueue, type SendQueueOptions } from "./send-queue.js";
export { lookUpOwn, type Evidence } from "./tx-evidence.js";
