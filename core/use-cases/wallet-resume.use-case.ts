/**
 * Resuming a paused exchange wallet (POST /api/v1/wallets/{address}/resume): an admin's decision,
 * recorded in the audit log in the write that ends the pause. A wallet is paused when a
 * transaction the service never signed was mined from it and OUTSIDE_TX_POLICY is `pause`
 * (core/ports/watch.port.ts); until it is resumed, no trade is signed from it.
 */
import { authorizeWalletResume, callerOf } from "../access/authorize.js";
import { walletResumedEntry } from "../audit.js";
import { InvalidArgumentError, WalletNotPausedError } from "../errors.js";
import type { WatchJournal } from "../ports/watch.port.js";
import type { TradeContext } from "./trade.use-case.js";
import type { PolicySource } from "./trade-status.use-case.js";

/** The answer to a resume: the wallet, no longer paused, and the pause that ended. */
export interface WalletResumeView {
  wallet: string;
  paused: false;
  /** The pause ended: since when, and the outside transaction that caused it (its hash when known). */
  pause: { since: string; nonce: number; hash: string | null };
}

export type ResumeWalletUseCase = (address: unknown, context?: TradeContext) => Promise<WalletResumeView>;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * Ends the pause of `address`, one of `wallets`, for an admin; the other instances sharing the
 * journal stop refusing its trades at their next look (within a block or a second).
 */
export function resumeWalletUseCase(
  watch: WatchJournal,
  wallets: readonly string[],
  policy?: PolicySource,
): ResumeWalletUseCase {
  const known = new Map(wallets.map((wallet) => [wallet.toLowerCase(), wallet]));
  return async (address, context = {}) => {
    const caller = callerOf(context);
    authorizeWalletResume(policy?.(), caller);
    if (typeof address !== "string" || !ADDRESS.test(address))
      throw new InvalidArgumentError("address", "must be an address: 0x followed by 40 hex digits");
    const wallet = known.get(address.toLowerCase());
    if (wallet === undefined)
      throw new InvalidArgumentError("address", `${address} is not an exchange wallet of this service`);
    const paused = (await watch.walletPauses()).find((pause) => pause.wallet === address.toLowerCase());
    if (paused === undefined) throw new WalletNotPausedError(wallet);
    const ended = await watch.resumeWallet(paused.wallet, walletResumedEntry(caller, paused));
    if (ended === undefined) throw new WalletNotPausedError(wallet); // resumed meanwhile by another admin
    return {
      wallet,
      paused: false,
      pause: { since: ended.since.toISOString(), nonce: ended.nonce, hash: ended.hash },
    };
  };
}
