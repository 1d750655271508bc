/**
 * Cancelling and speeding up a trade (POST /api/v1/trades/{id}/cancel and /speed-up, gRPC
 * CancelTrade and SpeedUpTrade; docs/operations.md "On call"), for the key that sent it or an
 * admin. Both answer at once with the trade as GET /api/v1/trades/{id} shows it.
 *
 * - A trade with nothing signed (accepted, held for an approval, approved) is cancelled at once:
 *   its run, if one is on its way, is refused when it would be journalled signed, so nothing of it
 *   is broadcast; its room in the spending limits is given back.
 * - A signed or submitted trade: the cancel is recorded on it first (so that a restart, or another
 *   instance's monitor, still sees it through), then the wallet's lifecycle monitor replaces its
 *   transaction with a no-op at its nonce (TradeReplacer). The trade is `cancelled` once that no-op
 *   is mined with the required confirmations; if its own transaction is mined first, it is
 *   `confirmed` (or `failed`, reverted) and the cancel is `too_late`.
 * - A speed-up re-prices its transaction at the same nonce.
 *
 * Refusals sign nothing: a trade the key does not see is not found (404, as GET); one it sees but
 * did not send is refused (403) unless the key is an admin; a final or mined trade is 409.
 */
import { callerOf, sees, visibilityOf } from "../access/authorize.js";
import type { Caller } from "../access/policy.js";
import { actorOf, replacementEntry, replacementRefusedEntry } from "../audit.js";
import {
  InvalidArgumentError,
  PermissionDeniedError,
  TradeNotFoundError,
  TradeNotReplaceableError,
} from "../errors.js";
import type { AuditEntry, AuditLog } from "../ports/audit.port.js";
import type { TradeCancel, TradeJournal, TradeRecord } from "../ports/journal.port.js";
import type { Replacement, TradeReplacer } from "../ports/trade.port.js";
import type { TradeContext } from "./trade-context.js";
import { type PolicySource, TRADE_ID, type TradeStatusUseCase, type TradeView } from "./trade-status.use-case.js";

/** `id`: the trade's id; `body`: the request's body (none, or a JSON object). Answers the trade as GET shows it. */
export type CancelTradeUseCase = (id: unknown, body: unknown, context?: TradeContext) => Promise<TradeView>;
export type SpeedUpTradeUseCase = CancelTradeUseCase;

export interface CancelDeps {
  journal: TradeJournal;
  /** The chain's side: the wallets' monitors, which sign the replacements. */
  replacer: TradeReplacer;
  /** The trade as GET shows it, asked of the chain first (tradeStatusUseCase). */
  status: TradeStatusUseCase;
  policy?: PolicySource;
  /** The audit log, when the service keeps one: each cancel and speed-up is recorded there. */
  audit?: AuditLog;
}

/** The states a trade is in with nothing of it signed, from which a cancel cancels it at once. */
const UNSIGNED = ["accepted", "pending_approval", "approved"] as const;

/** The error a cancelled trade carries (a keyed retry of it answers this, 409). */
function cancelledError(caller: Caller, signed: boolean): { code: string; message: string } {
  return {
    code: "trade_cancelled",
    message: signed
      ? `cancelled by ${actorOf(caller)}: the no-op at its nonce was mined in its place; nothing was paid`
      : `cancelled by ${actorOf(caller)} before anything was signed; nothing was paid`,
  };
}

/** Cancels a trade: at once with nothing signed; else records the cancel, and has its transaction replaced by a no-op. */
export function cancelTradeUseCase(deps: CancelDeps): CancelTradeUseCase {
  return recordingRefusals(deps, "cancel", cancel(deps));
}

/** Re-prices a trade's pending transaction at its nonce, at replacement fees or at the `maxFeePerGasGwei` asked. */
export function speedUpTradeUseCase(deps: CancelDeps): SpeedUpTradeUseCase {
  return recordingRefusals(deps, "speed-up", speedUp(deps));
}

/**
 * `run`, its refusals by authority (403, 404) or for a trade with nothing to replace (409) recorded
 * in the audit log under an access file (replacement.refused) before they are answered; a malformed
 * request is not (it is refused before anything else), nor anything without an access file.
 */
function recordingRefusals(deps: CancelDeps, what: "cancel" | "speed-up", run: CancelTradeUseCase): CancelTradeUseCase {
  const audit = deps.audit;
  if (audit === undefined) return run;
  return async (id, body, context = {}) => {
    try {
      return await run(id, body, context);
    } catch (error) {
      const refusal =
        error instanceof PermissionDeniedError ||
        error instanceof TradeNotFoundError ||
        error instanceof TradeNotReplaceableError;
      if (refusal && deps.policy?.() !== undefined && typeof id === "string")
        await audit.appendAudit(replacementRefusedEntry(callerOf(context), what, id.toLowerCase(), error));
      throw error;
    }
  };
}

function cancel(deps: CancelDeps): CancelTradeUseCase {
  return async (id, body, context = {}) => {
    const caller = callerOf(context);
    const tradeId = parseId(id);
    noFields(body);
    let record = await sentBy(deps, caller, tradeId);
    const cancel: TradeCancel = { requestedBy: actorOf(caller), requestedAt: new Date().toISOString() };
    // Asked before: the same outcome, nothing signed again (the monitor re-prices its no-op).
    if (record.cancel != null) return deps.status(record.id, context, "id");
    if ((UNSIGNED as readonly string[]).includes(record.status) && record.txHash === null) {
      const entry = entryOf(deps, caller, "trade.cancel_requested", record, { state: "cancelled" });
      if (await deps.journal.markCancelled(record.id, cancelledError(caller, false), cancel, entry))
        return deps.status(record.id, context, "id");
      // Signed meanwhile: cancelled as a signed trade is.
      record = (await deps.journal.get(record.id)) ?? record;
    }
    if (record.status !== "signed" && record.status !== "submitted") throw notReplaceable(record, "cancel");
    // Recorded with the cancel, in its write: the no-op that follows is the trade's (cancel.noopHash).
    const entry = entryOf(deps, caller, "trade.cancel_requested", record, { state: "pending" });
    const requested = await deps.journal.requestCancel(record.id, cancel, entry);
    if (requested === undefined) throw new TradeNotFoundError(tradeId, "id");
    // Another request's cancel was first, or the trade moved on meanwhile: answered as it is.
    if (requested.cancel?.requestedAt !== cancel.requestedAt || requested.cancel.requestedBy !== cancel.requestedBy) {
      if (requested.cancel != null) return deps.status(record.id, context, "id");
      // Given back meanwhile (its only transaction could never be mined): cancelled at once, if still unsigned.
      if (requested.status === "accepted" && requested.txHash === null) {
        const given = entryOf(deps, caller, "trade.cancel_requested", requested, { state: "cancelled" });
        if (await deps.journal.markCancelled(record.id, cancelledError(caller, false), cancel, given))
          return deps.status(record.id, context, "id");
      }
      throw notReplaceable(requested, "cancel");
    }
    await deps.replacer.cancel(targetOf(requested));
    return deps.status(record.id, context, "id");
  };
}

function speedUp(deps: CancelDeps): SpeedUpTradeUseCase {
  return async (id, body, context = {}) => {
    const caller = callerOf(context);
    const tradeId = parseId(id);
    const maxFeePerGas = parseSpeedUp(body);
    const record = await sentBy(deps, caller, tradeId);
    if (record.status !== "signed" && record.status !== "submitted") throw notReplaceable(record, "speed-up");
    if (record.cancel != null)
      throw new TradeNotReplaceableError(record.id, record.status, "speed-up", "a cancel was asked of it");
    if (record.broadcasts.at(-1)?.noop === true)
      throw new TradeNotReplaceableError(
        record.id,
        record.status,
        "speed-up",
        "its deadline passed: a no-op is freeing its nonce",
      );
    // A replacement's record is appended with it, in the ledger's write; nothing replaced, alone.
    const audit =
      deps.audit === undefined
        ? undefined
        : (replaced: Replacement) => entryOf(deps, caller, "trade.sped_up", record, replaced)!;
    const done = await deps.replacer.speedUp(targetOf(record), maxFeePerGas, audit);
    if (done.state !== "replaced" && audit !== undefined) await deps.audit!.appendAudit(audit(done));
    return deps.status(record.id, context, "id");
  };
}

function parseId(id: unknown): string {
  if (typeof id !== "string" || !TRADE_ID.test(id))
    throw new InvalidArgumentError("id", "must be a trade's id (a UUID, as GET /api/v1/trades/{id} names it)");
  return id.toLowerCase();
}

/** A body that takes no field: none, null, or an empty object. */
function noFields(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== "object" || Array.isArray(body))
    throw new InvalidArgumentError("request", "must be a JSON object, {}, or no body");
  const key = Object.keys(body)[0];
  if (key !== undefined)
    throw new InvalidArgumentError(/^[\w.-]{1,64}$/.test(key) ? key : "request", "is not a known field (none is)");
}

/** A speed-up's optional {"maxFeePerGasGwei": "<decimal>"}: the maximum fee in wei, or undefined. */
function parseSpeedUp(body: unknown): bigint | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body !== "object" || Array.isArray(body))
    throw new InvalidArgumentError("request", 'must be a JSON object, {"maxFeePerGasGwei": "..."}, or no body');
  for (const key of Object.keys(body))
    if (key !== "maxFeePerGasGwei")
      throw new InvalidArgumentError(
        /^[\w.-]{1,64}$/.test(key) ? key : "request",
        "is not a known field (only maxFeePerGasGwei is)",
      );
  const value = (body as { maxFeePerGasGwei?: unknown }).maxFeePerGasGwei;
  if (value === undefined || value === null) return undefined;
  return parseGwei(value, "maxFeePerGasGwei");
}

/**
 * Gwei as decimal text ("1.5") to wei, exactly: at most 9 decimals (a wei), more than 0. Nothing is
 * rounded: a value finer than a wei is refused.
 */
export function parseGwei(value: unknown, field: string): bigint {
  if (typeof value !== "string" || !/^\d{1,30}(\.\d{1,9})?$/.test(value))
    throw new InvalidArgumentError(field, 'must be gwei as decimal text, with at most 9 decimals ("1.5")');
  const [whole, fraction = ""] = value.split(".");
  const wei = BigInt(whole!) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0"));
  if (wei === 0n) throw new InvalidArgumentError(field, "must be more than 0");
  return wei;
}

/**
 * The trade `id` as the caller may act on it: one it does not see is not found (as GET answers);
 * one it sees but did not send is refused, unless the caller is an admin.
 */
async function sentBy(deps: CancelDeps, caller: Caller, id: string): Promise<TradeRecord> {
  const policy = deps.policy?.();
  const record = await deps.journal.get(id);
  if (record === undefined || !sees(visibilityOf(policy, caller), record)) throw new TradeNotFoundError(id, "id");
  const admin = caller.key?.roles.has("admin") === true;
  const sender = record.scope === caller.id || (record.keyName !== null && record.keyName === caller.key?.name);
  if (!sender && !admin)
    throw new PermissionDeniedError(
      `api key "${caller.key?.name ?? caller.id}" may not cancel or speed up trade ${id}: only the key that sent it (${record.keyName ?? "another key"}) or an admin may`,
    );
  return record;
}

function notReplaceable(record: TradeRecord, what: "cancel" | "speed-up"): TradeNotReplaceableError {
  const why =
    record.status === "mined"
      ? "its transaction is mined"
      : (UNSIGNED as readonly string[]).includes(record.status)
        ? "nothing of it is signed yet"
        : undefined;
  return new TradeNotReplaceableError(record.id, record.status, what, why);
}

function targetOf(record: TradeRecord): { tradeId: string; wallet: string; nonce: number } {
  return { tradeId: record.id, wallet: record.wallet!, nonce: record.nonce! };
}

/**
 * The audit record of a cancel or a speed-up, when the service keeps an audit log: handed to the
 * journal write that makes the change (markCancelled, requestCancel, the replacement's
 * recordBroadcast), so that both or neither are written.
 */
function entryOf(
  deps: CancelDeps,
  caller: Caller,
  action: "trade.cancel_requested" | "trade.sped_up",
  record: TradeRecord,
  done: Replacement | { state: "cancelled" | "pending" },
): AuditEntry | undefined {
  if (deps.audit === undefined) return undefined;
  const replaced = done.state === "replaced" ? done : undefined;
  return replacementEntry(caller, action, record.id, {
    status: record.status,
    nonce: record.nonce,
    previousHash: record.txHash,
    hash: replaced?.hash ?? null,
    maxFeePerGas: replaced?.maxFeePerGas.toString() ?? null,
    maxPriorityFeePerGas: replaced?.maxPriorityFeePerGas.toString() ?? null,
    outcome: "reason" in done ? `${done.state}: ${done.reason}` : done.state,
  });
}
