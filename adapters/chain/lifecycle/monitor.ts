/**
 * The lifecycle monitor of one exchange wallet: it sees every nonce the service used through to
 * a definite end, as hot-wallet relayers do (OpenZeppelin Relayer's status checker and
 * replacement rules; Defender's relayer):
 *
 * - a nonce used on chain: the broadcast that was mined counts (the first, a re-priced
 *   replacement, or a no-op); its trade is confirmed (or failed if it reverted, or expired if
 *   the no-op was mined). None of them: someone else used the wallet, and after three looks
 *   the trade fails with nothing paid;
 * - a nonce not used, whose transaction the node no longer knows (evicted in a fee spike,
 *   dropped, lost in a node restart or a reorg): the same signed bytes are sent again, so
 *   nothing can be paid twice; if the node refuses them for their fees, they are re-priced;
 * - not mined within `resubmitAfterMs` (doubling with each broadcast): replaced at the same
 *   nonce with higher fees (fees.ts: the market's, or the last + 10 % + 1 wei, up to the cap);
 * - its deadline passed (by the later of the chain's clock and this machine's, as the deadline
 *   was set): replaced by a no-op, a 0-value transfer to the wallet itself, which may outbid the cap so that a cap can never wedge the wallet. The
 *   trade's call cannot execute after its deadline anyway; the no-op frees the nonce;
 * - a gap below the highest nonce used (nothing recorded at it): filled with a no-op;
 * - mined transactions are watched until they are `reorgDepth` blocks deep: one whose block
 *   left the canonical chain goes back to pending (its trade to `submitted`) and is dealt with
 *   as above; one mined again elsewhere gets its new receipt.
 *
 * With a journal shared by several instances, exactly one monitors a wallet at a time: the
 * holder of the lease `monitor:<wallet>`, renewed at every look. When it dies, the lease runs
 * out and another instance takes over. Every action is recorded in the ledger before it is
 * broadcast, and each look starts again from the ledger and the chain, so a crash at any point
 * leaves nothing the next look cannot finish.
 */
import { type NonceSlot, type Replacement, type ReplacementAudit, TradeDroppedError } from "../../../core/index.js";
import { marketFees, noopFees, type ChainState, type Outcome } from "../blocks/index.js";
import { isAlreadyKnown, isNonceConflict, isUnderpriced } from "../rpc/index.js";
import { lookUpOwn, sendFiller } from "../send/index.js";
import type { WalletMonitorOptions } from "./options.js";
import { replace, reprice, type ReplaceContext } from "./replace.js";
import { cancelNow, cancelPending, type ReplaceTarget, speedUpNow, Turns } from "./replace-now.js";
import { settle } from "./settle.js";

/**
 * Looks in a row that find a nonce used but none of its broadcasts mined, before it counts as
 * lost; the first and the last are at least `minAgeMs` apart, and the last asks every endpoint.
 */
const LOST_AFTER_LOOKS = 3;

/** Default of silentEndpointGraceMs (options.ts): ten minutes. */
const SILENT_ENDPOINT_GRACE_MS = 600_000;

export class WalletMonitor {
  readonly #opts: WalletMonitorOptions;
  readonly #wallet: string;
  readonly #lease: string;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = true;
  #leader = false;
  #oldestPending: { nonce: number; since: Date } | undefined;
  /** Per nonce: looks in a row that found it used on chain with none of its broadcasts mined, since when (ms). */
  readonly #unexplained = new Map<number, { looks: number; since: number }>();
  /** Mined transactions already recorded as confirmed (hash:block), when confirmations > 1. */
  readonly #confirmed = new Set<string>();
  /** Nonces whose replacement the cap stopped, logged once each. */
  readonly #capped = new Set<string>();
  /** When each nonce's latest broadcast was last sent again (a re-send restarts its clock). */
  readonly #resent = new Map<number, number>();
  /** What the monitor's steps (replace.ts, settle.ts) are given of it. */
  readonly #context: ReplaceContext;
  /** The looks, cancels and speed-ups, one at a time. */
  readonly #turns = new Turns();

  constructor(options: WalletMonitorOptions) {
    this.#opts = options;
    this.#wallet = options.signer.address;
    this.#lease = `monitor:${this.#wallet.toLowerCase()}`;
    this.#context = { opts: options, wallet: this.#wallet, capped: this.#capped };
  }

  get wallet(): string {
    return this.#wallet;
  }

  /** The oldest nonce nothing is mined at yet, and since when, as of the last look. */
  oldestPending(): { nonce: number; since: Date } | undefined {
    return this.#oldestPending;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops looking (a look under way finishes) and gives the lease up, so another instance takes over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    if (this.#leader) await this.#opts.journal.releaseLease(this.#lease, this.#opts.holder).catch(() => {});
    this.#leader = false;
  }

  #schedule(delay: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.look()
        .catch((error: unknown) =>
          this.#opts.log.warn({ wallet: this.#wallet, err: error }, "lifecycle monitor: look failed; trying again"),
        )
        .finally(() => {
          this.#running = undefined;
          this.#schedule(this.#opts.settings.intervalMs);
        });
    }, delay);
    this.#timer.unref();
  }

  /**
   * One look at every open nonce of the wallet (exposed for tests; `start()` runs it periodically),
   * in turn with the cancels and speed-ups (replace-now.ts): none interleaves with a look.
   */
  look(): Promise<void> {
    return this.#turns.run(() => this.#look());
  }

  /**
   * A cancel's no-op at the trade's nonce (replace-now.ts), in turn with the looks, by the holder
   * of the wallet's lease only: another instance's monitor sends the recorded cancel at its look.
   */
  cancel(target: ReplaceTarget): Promise<Replacement> {
    return this.#turns.run(async () =>
      (await this.#lead())
        ? cancelNow(this.#context, target)
        : {
            state: "deferred",
            reason: "another instance watches the wallet: its monitor sends the no-op at its next look",
          },
    );
  }

  /**
   * A speed-up of the trade's transaction at its nonce (replace-now.ts), in turn with this
   * instance's looks, whether or not it holds the wallet's lease: the answer is now, not at a look.
   * Against the lease holder's looks, the ledger orders the replacements (recordBroadcast takes
   * only the one in place of the slot's last broadcast; the other is not sent).
   */
  speedUp(target: ReplaceTarget, maxFeePerGas?: bigint, audit?: ReplacementAudit): Promise<Replacement> {
    return this.#turns.run(() => speedUpNow(this.#context, target, maxFeePerGas, audit));
  }

  /** Whether this instance holds the wallet's lease (taken or renewed now), as a look asks it. */
  async #lead(): Promise<boolean> {
    const { journal, settings, holder } = this.#opts;
    const leader = await journal.acquireLease(this.#lease, holder, settings.leaseMs);
    if (leader !== this.#leader) {
      this.#opts.log.info(
        { wallet: this.#wallet, holder },
        leader ? "lifecycle monitor: watching the wallet" : "lifecycle monitor: another instance watches the wallet",
      );
      this.#leader = leader;
    }
    return leader;
  }

  async #look(): Promise<void> {
    const { journal, provider } = this.#opts;
    const slots = await journal.openSlots(this.#wallet);
    const pending = slots.filter((slot) => slot.state === "pending");
    this.#oldestPending = pending[0] && { nonce: pending[0].nonce, since: pending[0].createdAt };
    if (slots.length === 0) return;
    if (!(await this.#lead())) return;

    const mined = slots.filter((slot) => slot.state === "mined");
    if (pending.length === 0) {
      // Only mined nonces, watched for reorgs: the head's number is all this look needs (no fees,
      // no nonce count: nothing below a mined nonce can be a gap).
      // The watcher's head serves when it vouches for the highest mined block, else the node's.
      const top = mined.at(-1)?.mined ?? undefined;
      await this.#watchMined(
        mined,
        await this.#opts.receipts.head(top && { number: top.blockNumber, hash: top.blockHash }),
      );
      return;
    }
    if (!pending.some((slot) => this.#due(slot))) {
      // Every pending nonce is too young to act on (#advance and #fillGaps leave it alone): the
      // nonce count is not needed, and the fees' head is the block watcher's when it is looking.
      await this.#watchMined(mined, (await this.#opts.fees.read()).head.number);
      return;
    }
    const [state, latestNonce] = await Promise.all([
      this.#opts.fees.read(),
      provider.getTransactionCount(this.#wallet, "latest"),
    ]);
    await this.#watchMined(mined, state.head.number);
    for (const slot of pending) await this.#advance(slot, state, latestNonce);
    await this.#fillGaps(slots, latestNonce, state);
  }

  /**
   * Whether a look may act on a pending nonce: #advance does once its send was answered and its
   * latest broadcast is `minAgeMs` old; #fillGaps does below a nonce created `minAgeMs` ago.
   */
  #due(slot: NonceSlot): boolean {
    const { minAgeMs } = this.#opts.settings;
    const now = Date.now();
    if (now - slot.createdAt.getTime() >= minAgeMs) return true;
    const answered = this.#opts.sends?.sentAt(slot.nonce);
    if (answered === null) return false;
    const last = slot.broadcasts.at(-1)!;
    return now - Math.max(last.sentAt.getTime(), this.#resent.get(slot.nonce) ?? 0, answered ?? 0) >= minAgeMs;
  }

  /** Mined nonces: final once deep enough; a reorg sends them back to pending, or to their new block. */
  async #watchMined(mined: NonceSlot[], head: number): Promise<void> {
    const { journal, settings, receipts } = this.#opts;
    const finalAt = head - Math.max(settings.reorgDepth, settings.confirmations) + 1;
    if (mined.some((slot) => slot.mined!.blockNumber <= finalAt)) await journal.finalizeSlots(this.#wallet, finalAt);
    const watched = mined.filter((slot) => slot.mined!.blockNumber > finalAt);
    if (watched.length === 0) return;
    // A reorg that removed any watched block removed the highest one too: one receipt tells.
    const top = watched.reduce((a, b) => (b.mined!.blockNumber > a.mined!.blockNumber ? b : a));
    // The block watcher, when it is looking, has the chain as of its latest look: no call needed
    // while it read the top block and every head since links to it.
    const onChain =
      receipts.canonical(top.mined!.blockNumber, top.mined!.blockHash) ??
      (await receipts.receipt(top.mined!.hash).then((r) => r !== null && r.blockHash === top.mined!.blockHash));
    if (!onChain) {
      for (const slot of watched) await this.#recheck(slot);
      return;
    }
    if (settings.confirmations > 1) {
      for (const slot of watched) {
        const depth = head - slot.mined!.blockNumber + 1;
        const key = `${slot.mined!.hash}:${slot.mined!.blockHash}`;
        if (slot.tradeId === null || depth < settings.confirmations || this.#confirmed.has(key)) continue;
        const found = await receipts.find(slot.broadcasts);
        if (found !== undefined) await this.#settle(slot, found);
        this.#confirmed.add(key);
      }
    }
  }

  /** A watched nonce whose block may have left the canonical chain. */
  async #recheck(slot: NonceSlot): Promise<void> {
    const { journal, receipts, log } = this.#opts;
    const found = await receipts.find(slot.broadcasts);
    const was = slot.mined!;
    if (found !== undefined && found.receipt.blockHash === was.blockHash) return;
    if (found !== undefined) {
      log.warn(
        {
          tradeId: slot.tradeId,
          wallet: this.#wallet,
          nonce: slot.nonce,
          hash: found.receipt.transactionHash,
          orphanedBlock: was.blockHash,
          block: Number(found.receipt.blockNumber),
        },
        "reorg: transaction mined again in another block",
      );
      // Its block did leave: recorded as such (a trade.reorged webhook), then settled in the new one.
      if (slot.tradeId !== null) await journal.markReorged(slot.tradeId);
      await this.#settle(slot, found);
      return;
    }
    log.warn(
      { tradeId: slot.tradeId, wallet: this.#wallet, nonce: slot.nonce, hash: was.hash, orphanedBlock: was.blockHash },
      "reorg: transaction's block left the canonical chain; watching it again",
    );
    await journal.markSlot(this.#wallet, slot.nonce, "pending", null);
    if (slot.tradeId !== null) await journal.markReorged(slot.tradeId);
  }

  /** A nonce nothing is mined at, as far as the ledger knows. */
  async #advance(slot: NonceSlot, state: ChainState, latestNonce: number): Promise<void> {
    const { log, settings } = this.#opts;
    const last = slot.broadcasts.at(-1)!;
    // A send still on its way is the sender's alone: nothing is re-sent or replaced under it.
    const answered = this.#opts.sends?.sentAt(slot.nonce);
    if (answered === null) return;
    const age = Date.now() - Math.max(last.sentAt.getTime(), this.#resent.get(slot.nonce) ?? 0, answered ?? 0);
    // A broadcast this young is still the sender's business: the trade call records its receipt.
    if (age < settings.minAgeMs) return;
    if (slot.nonce < latestNonce) {
      // The nonce is used: by one of its broadcasts, or by a transaction not signed for it.
      await this.#nonceUsed(slot);
      return;
    }
    this.#unexplained.delete(slot.nonce);
    const market = marketFees(state);

    // A cancel asked of its trade with no no-op at its nonce yet: the cancel's (replace-now.ts).
    if (await cancelPending(this.#context, slot, last, market)) return;
    // By the later of the chain's clock and this machine's, as the deadline was set: a chain that
    // stopped making blocks must not keep a trade alive that would execute late once they resume.
    const now = Math.max(state.head.timestamp, Math.floor(Date.now() / 1000));
    if (slot.deadline !== null && !last.noop && now >= slot.deadline) {
      // Its call can no longer succeed: free the nonce, so the wallet's later transactions go on.
      await replace(
        this.#context,
        slot,
        last,
        noopFees(last, market, settings.feeCap),
        true,
        "deadline passed: freeing the nonce with a no-op",
      );
      return;
    }
    const known = await Promise.all(
      slot.broadcasts.map((b) => this.#opts.provider.send("eth_getTransactionByHash", [b.hash]).catch(() => undefined)),
    );
    if (known.every((tx) => tx === null)) {
      // The node has forgotten it (evicted, dropped, restarted, reorged away): the same bytes again.
      try {
        await this.#opts.provider.send("eth_sendRawTransaction", [last.rawTx]);
        this.#resent.set(slot.nonce, Date.now());
        log.warn(
          { tradeId: slot.tradeId, wallet: this.#wallet, nonce: slot.nonce, hash: last.hash },
          "re-sent a transaction the node no longer knew (same signed bytes)",
        );
        return;
      } catch (error) {
        if (isAlreadyKnown(error) || isNonceConflict(error)) return; // in the pool after all, or the nonce was just used
        if (!isUnderpriced(error)) {
          log.warn(
            { tradeId: slot.tradeId, wallet: this.#wallet, nonce: slot.nonce, hash: last.hash, err: error },
            "could not re-send a transaction; trying again",
          );
          return;
        }
        // It can never be mined at its fees now: re-priced at once.
      }
      await reprice(this.#context, slot, last, market, "re-priced a transaction the node refused for its fees", now);
      return;
    }
    if (age >= settings.resubmitAfterMs * 2 ** (slot.broadcasts.length - 1)) {
      await reprice(
        this.#context,
        slot,
        last,
        market,
        "replaced a transaction not mined in time, with higher fees",
        now,
      );
    }
  }

  /**
   * A used nonce none of whose broadcasts the ledger knows mined: settled once one of them is
   * found mined; lost (its trade failed, nothing paid) once every endpoint says another
   * transaction took it, after LOST_AFTER_LOOKS looks at least `minAgeMs` apart.
   */
  async #nonceUsed(slot: NonceSlot): Promise<void> {
    const { receipts, journal, log, settings, provider } = this.#opts;
    const found = await receipts.find(slot.broadcasts);
    if (found !== undefined) {
      this.#unexplained.delete(slot.nonce);
      await this.#settle(slot, found);
      return;
    }
    const seen = this.#unexplained.get(slot.nonce) ?? { looks: 0, since: Date.now() };
    seen.looks += 1;
    this.#unexplained.set(slot.nonce, seen);
    if (seen.looks < LOST_AFTER_LOOKS || Date.now() - seen.since < settings.minAgeMs) return;
    // The last word is every endpoint's: one that lags, or lost an answer, proves nothing.
    const evidence = await lookUpOwn(
      provider,
      this.#wallet,
      slot.nonce,
      slot.broadcasts.map((b) => b.hash),
    );
    // Mined or pooled where the service's endpoint has not looked yet: not lost. Its receipt
    // is recorded once that endpoint sees it (a lagging endpoint's fork is no evidence).
    if (evidence.state === "mined" || evidence.state === "known") {
      this.#unexplained.delete(slot.nonce);
      return;
    }
    // An endpoint that does not answer may hold the transaction: its silence is waited out, up
    // to silentEndpointGraceMs of every other endpoint saying the nonce was taken (a dead
    // backup endpoint must not keep the trade unsettled, and its amount reserved, for ever).
    const silentTooLong =
      evidence.state === "unknown" &&
      evidence.takenByTheRest &&
      Date.now() - seen.since >= (this.#opts.silentEndpointGraceMs ?? SILENT_ENDPOINT_GRACE_MS);
    if (evidence.state !== "taken" && !silentTooLong) return;
    this.#unexplained.delete(slot.nonce);
    log.warn(
      { tradeId: slot.tradeId, wallet: this.#wallet, nonce: slot.nonce, hashes: slot.broadcasts.map((b) => b.hash) },
      "nonce used by a transaction this service did not sign for it; nothing of it was paid",
    );
    await journal.markSlot(this.#wallet, slot.nonce, "lost", null);
    if (slot.tradeId !== null) {
      const error = new TradeDroppedError(this.#wallet, slot.nonce);
      await journal.markFailed(slot.tradeId, { code: error.code, message: error.message });
    }
  }

  /** Records what was mined at the slot's nonce, and what it means for its trade (settle.ts). */
  async #settle(slot: NonceSlot, found: Outcome): Promise<void> {
    this.#resent.delete(slot.nonce);
    await settle(this.#context, slot, found);
  }

  /** Nonces below the highest one used that the ledger holds nothing at: a no-op each, so later ones can be mined. */
  async #fillGaps(slots: NonceSlot[], latestNonce: number, state: ChainState): Promise<void> {
    const { journal, settings, signer, chainId, provider, log } = this.#opts;
    const top = slots.at(-1);
    if (top === undefined || top.nonce <= latestNonce) return;
    const used = new Set(slots.map((slot) => slot.nonce));
    for (let nonce = latestNonce; nonce < top.nonce; nonce++) {
      if (used.has(nonce)) continue;
      // A sender may be recording this nonce right now: only once the nonces above it are old.
      const above = slots.find((slot) => slot.nonce > nonce)!;
      if (Date.now() - above.createdAt.getTime() < settings.minAgeMs) return;
      if ((await journal.slot(this.#wallet, nonce)) !== undefined) continue;
      const fees = noopFees({ maxFeePerGas: 0n, maxPriorityFeePerGas: 0n }, marketFees(state), settings.feeCap);
      const filler = await sendFiller({ signer, chainId, ledger: journal, provider }, nonce, fees);
      if (!filler.recorded) return; // recorded meanwhile by someone else: the next look sees it
      log.warn(
        { wallet: this.#wallet, nonce, hash: filler.hash, sent: filler.sent },
        "filled a nonce gap with a no-op",
      );
    }
  }
}
