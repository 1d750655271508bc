import type { TradeListView } from "../../../core/index.js";

/** The columns of the trade history's CSV form, in order. */
export const TRADE_CSV_COLUMNS = [
  "id",
  "createdAt",
  "updatedAt",
  "kind",
  "status",
  "userAddress",
  "destinatary",
  "usdAddress",
  "stableSymbol",
  "amount",
  "amountIn",
  "amountOut",
  "gasWei",
  "transactionHash",
  "wallet",
  "nonce",
  "blockNumber",
  "errorCode",
  "errorMessage",
  // A trade an approval rule held: its approvers, space-separated, oldest first, and who rejected it.
  "approvedBy",
  "rejectedBy",
] as const;

export const CSV_CONTENT_TYPE = "text/csv; charset=utf-8; header=present";

/** Whether the Accept header asks for CSV. */
export function acceptsCsv(accept: string | string[] | undefined): boolean {
  const value = Array.isArray(accept) ? accept.join(",") : (accept ?? "");
  return /(^|,)\s*text\/csv\s*(;|,|$)/i.test(value);
}

/**
 * One field as RFC 4180 writes it: quoted, with quotes doubled, when it holds a quote, comma or
 * line break. A text a spreadsheet would run as a formula (=, +, -, @, tab or CR first, OWASP's
 * "CSV injection": an error message can carry a node's words) gets a leading apostrophe; no
 * amount, address or time starts so.
 */
export function csvField(value: string | number | null): string {
  let text = value === null ? "" : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * A page of trades as CSV (RFC 4180): a header line, then one trade a line, CRLF-terminated.
 * Amounts are exact decimal strings: `amount` as the request gave it, `amountIn` and `amountOut`
 * as the swap's event paid them (empty until executed), `gasWei` in wei.
 */
export function tradesCsv(list: TradeListView): string {
  const lines = [TRADE_CSV_COLUMNS.join(",")];
  list.trades.forEach((trade, i) => {
    const figures = list.figures[i];
    const row: Record<(typeof TRADE_CSV_COLUMNS)[number], string | number | null> = {
      id: trade.id,
      createdAt: trade.createdAt,
      updatedAt: trade.updatedAt,
      kind: trade.kind,
      status: trade.status,
      userAddress: trade.request.userAddress,
      destinatary: trade.request.destinatary,
      usdAddress: trade.request.usdAddress,
      stableSymbol: figures?.stableSymbol ?? null,
      amount: trade.request.amount,
      amountIn: figures?.amountIn ?? null,
      amountOut: figures?.amountOut ?? null,
      gasWei: figures?.gasWei ?? null,
      transactionHash: trade.transactionHash,
      wallet: trade.wallet,
      nonce: trade.nonce,
      blockNumber: trade.receipt?.blockNumber ?? null,
      errorCode: trade.error?.code ?? null,
      errorMessage: trade.error?.message ?? null,
      approvedBy: trade.approval?.approvals.map((given) => given.by).join(" ") ?? null,
      rejectedBy: trade.approval?.rejection?.by ?? null,
    };
    lines.push(TRADE_CSV_COLUMNS.map((column) => csvField(row[column])).join(","));
  });
  return `${lines.join("\r\n")}\r\n`;
}
