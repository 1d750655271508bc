import { create } from "@bufbuild/protobuf";

import type { TradeListView, TradeSummaryView } from "../../../core/index.js";
import {
  ListTradesResponseSchema,
  TradeSummarySchema,
  type GetTradeSummaryRequest,
  type ListTradesRequest,
  type ListTradesResponse,
  type TradeSummary,
} from "../../../gen/tokentrade/v1/token_pb.js";
import { tradeMessage } from "./proto-mapping.js";

/** The list query the use case validates; proto3's "" (and limit 0) count as not given, as on the JSON route. */
export function listTradesQueryFromMessage(message: ListTradesRequest): Record<string, string | number | undefined> {
  const orAbsent = (value: string) => (value === "" ? undefined : value);
  return {
    status: orAbsent(message.status),
    kind: orAbsent(message.kind),
    since: orAbsent(message.since),
    until: orAbsent(message.until),
    limit: message.limit === 0 ? undefined : message.limit,
    cursor: orAbsent(message.cursor),
  };
}

export function summaryQueryFromMessage(message: GetTradeSummaryRequest): Record<string, string | undefined> {
  return {
    since: message.since === "" ? undefined : message.since,
    until: message.until === "" ? undefined : message.until,
  };
}

export function listTradesMessage(list: TradeListView): ListTradesResponse {
  return create(ListTradesResponseSchema, {
    trades: list.trades.map(tradeMessage),
    ...(list.nextCursor === null ? {} : { nextCursor: list.nextCursor }),
  });
}

/** The summary as a message; null fields stay unset. */
export function tradeSummaryMessage(summary: TradeSummaryView): TradeSummary {
  const amount = (a: { value: string | null; baseUnits: string }) => ({
    ...(a.value === null ? {} : { value: a.value }),
    baseUnits: a.baseUnits,
  });
  return create(TradeSummarySchema, {
    ...(summary.since === null ? {} : { since: summary.since }),
    ...(summary.until === null ? {} : { until: summary.until }),
    groups: summary.groups.map((g) => ({
      kind: g.kind,
      usdAddress: g.usdAddress,
      ...(g.stableSymbol === null ? {} : { stableSymbol: g.stableSymbol }),
      count: BigInt(g.count),
      executed: BigInt(g.executed),
      amountIn: amount(g.amountIn),
      amountOut: amount(g.amountOut),
      gasWei: g.gasWei,
      ...(g.gasUsd === null ? {} : { gasUsd: g.gasUsd }),
      statuses: Object.fromEntries(Object.entries(g.statuses).map(([status, n]) => [status, BigInt(n)])),
    })),
  });
}
