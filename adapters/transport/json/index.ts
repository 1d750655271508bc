/**
 * The JSON routes of docs/SPEC.md (/api/v1/..., the probes, the OpenAPI document) and the small
 * HTTP layer under them: bounded JSON bodies, `{"code", "message"}` errors, the trade history's CSV.
 */
export { DEFAULT_BODY_LIMIT_BYTES, jsonRoutes, type JsonRoutes, type JsonRoutesOptions } from "./json-routes.js";
export { cachedReadiness, type Readiness } from "./readiness.js";
export { TRADE_CSV_COLUMNS, tradesCsv } from "./trade-history-csv.js";
