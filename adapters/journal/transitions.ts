/**
 * The trade model (core/trade-states.ts) in the SQL journals' words. Their statements change a
 * trade only where the model says its operation applies (`applies`, a condition each statement is
 * built with once), and a statement that changed nothing is answered as the model says
 * (`decide`): ignored, refused, or a trade the journal does not know. The memory journal asks
 * the model itself (tradeVerdict).
 */
import {
  TRADE_TRANSITIONS,
  TradeTransitionError,
  tradeVerdict,
  type TradeOperation,
  type TradeStatus,
  type TradeTransition,
} from "../../core/index.js";

/**
 * The SQL condition under which `operation` applies to a row of `trades` (as `alias`, if given):
 * its status among those the operation applies from, and no transaction when it applies only to
 * a trade without one. The statuses are the model's constants, written as literals, so each
 * statement is still prepared once; a single status is written `status = '…'`, as the partial
 * indexes on the status are (they match only that form).
 */
export function applies(operation: TradeOperation, alias?: string): string {
  const column = (name: string) => (alias === undefined ? name : `${alias}.${name}`);
  const rule: TradeTransition = TRADE_TRANSITIONS[operation];
  const status = statusIn(column("status"), rule.applies);
  const signedOnly =
    rule.onlySigned === undefined
      ? status
      : `${status} AND NOT (${statusIn(column("status"), rule.onlySigned)} AND ${column("tx_hash")} IS NULL)`;
  return rule.whenSigned === undefined ? signedOnly : `${signedOnly} AND ${column("tx_hash")} IS NULL`;
}

/** `column` holds one of `statuses`, in SQL. */
export function statusIn(column: string, statuses: readonly TradeStatus[]): string {
  if (statuses.length === 0) return "FALSE";
  if (statuses.length === 1) return `${column} = '${statuses[0]}'`;
  return `${column} IN (${statuses.map((status) => `'${status}'`).join(", ")})`;
}

/** The status `operation` leaves a trade in, as an SQL literal. */
export function statusAfter(operation: Exclude<TradeOperation, "discard" | "forgetUnsigned">): string {
  return `'${TRADE_TRANSITIONS[operation].to}'`;
}

/**
 * What the trade model says of `operation` on trade `id`, as read (undefined: not in the journal):
 * true when it applies, false when it ignores it; throws when the trade is not in the journal or
 * the model refuses the operation. Asked before a write that reads the trade first, and after a
 * statement that changed nothing (then a trade that moved between the statement and the read, on
 * PostgreSQL, answers true: the statement saw it as it was, and it is left as it is).
 */
export function decide(
  operation: TradeOperation,
  id: string,
  trade: { status: TradeStatus; txHash: string | null } | undefined,
): boolean {
  if (trade === undefined) throw new Error(`trade ${id} is not in the journal`);
  const verdict = tradeVerdict(operation, trade);
  if (verdict === "refused") throw new TradeTransitionError(operation, id, trade);
  return verdict === "applies";
}

/**
 * Why a journal refuses to sign a trade again once a cancel was asked of it (TradeJournal.markSigned):
 * its run, signed again past a nonce someone else's transaction took (the cancel's no-op, from
 * another instance), must not pay it after all; its no-op, or its own first transaction, decides.
 */
export function cancelAsked(id: string): Error {
  return new Error(`trade ${id} has a cancel asked of it: it is never signed again`);
}
