/**
 * The access policy: who may do what, and how much over time (ACCESS_FILE, docs/operations.md
 * "Access and limits"). The adapter reads and checks the file (adapters/config/access-file.ts);
 * the domain only reads the policy it was given, so a reload swaps one object for another.
 */
import type { TradeKind } from "../types.js";

/** What a key may do. A key may hold several. */
export const ROLES = ["trader", "viewer", "approver", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** An api key as the access file names it. Every address is lower-case. */
export interface AccessKey {
  /** Unique in the file: what history, limits and `sees` name the key by. */
  name: string;
  /** The lower-case hex SHA-256 of each key accepted under this name (two during a rotation). */
  sha256: readonly string[];
  /**
   * The id its requests carry (idempotency keys, quotes, webhooks, the rate limit): the file's
   * `id`, else the id of its first hash (keyIdOf), so a key keeps the id it had before the access
   * file, and every hash of a name shares one, across a rotation too.
   */
  id: string;
  roles: ReadonlySet<Role>;
  /** Scopes: absent means any. */
  kinds?: ReadonlySet<TradeKind>;
  wallets?: ReadonlySet<string>;
  coins?: ReadonlySet<string>;
  destinataries?: ReadonlySet<string>;
  /** CIDRs its requests must come from (matched by the transport, which knows the client's address). */
  allowFrom?: readonly string[];
  /** Ms since the epoch after which the key is refused as unknown. */
  expiresAt?: number;
  /** The names of the keys whose trades it reads besides its own; "all" for `["*"]` (and every admin). */
  sees: "all" | ReadonlySet<string>;
}

/** What a limit counts apart: each key, each exchange wallet, each destinatary, or the whole service. */
export const LIMIT_PERS = ["key", "wallet", "destinatary", "all"] as const;
export type LimitPer = (typeof LIMIT_PERS)[number];

/** The decimals a limit's USD is counted at: every stable coin's base units fit exactly (DAI has 18). */
export const LIMIT_USD_DECIMALS = 18;

export interface SpendingLimit {
  name: string;
  per: LimitPer;
  /** With per "key": the names of the keys it applies to, each counted apart; absent: every key. */
  keys?: ReadonlySet<string>;
  /** The rolling window, in ms, and as the file wrote it ("24h"), for messages. */
  windowMs: number;
  window: string;
  /** At LIMIT_USD_DECIMALS. */
  maxUsd?: bigint;
  maxTrades?: number;
}

/**
 * An approval rule: a trade it matches (of one of `keys`, or of any key; counting more than
 * `aboveUsd` as the limits count it) is held for `approvers` distinct approver keys, for at most
 * `expiresAfterMs` (core/approvals.ts).
 */
export interface ApprovalRule {
  name: string;
  /** At LIMIT_USD_DECIMALS: a trade counting more than this is held. */
  aboveUsd: bigint;
  /** The names of the keys whose trades it holds; absent: every key's. */
  keys?: ReadonlySet<string>;
  /** How many distinct approver keys must approve (1 or more). */
  approvers: number;
  /** How long a held trade waits, in ms, and as the file wrote it ("1h"), for messages. */
  expiresAfterMs: number;
  expiresAfter: string;
}

export interface AccessPolicy {
  /** Names this version of the file (a digest of its bytes and the denylist's): metrics and logs. */
  version: string;
  keys: readonly AccessKey[];
  limits: readonly SpendingLimit[];
  /** The approval rules; absent or empty: no trade is held. */
  approvals?: readonly ApprovalRule[];
  /** Lower-case addresses no trade may pay and no quote may name. */
  denylist: ReadonlySet<string>;
}

/** The id of an api key (idempotency keys and webhooks are scoped by it): the first 32 hex digits of its SHA-256. With an access file, a key's entry's (AccessKey.id). */
export function keyIdOf(sha256Hex: string): string {
  return sha256Hex.slice(0, 32);
}

/**
 * Who is asking. `id` scopes idempotency keys, quotes and webhooks; `key` is its entry in the
 * access file, absent when the service runs without one (every key a trader with no limits).
 */
export interface Caller {
  id: string;
  key?: AccessKey;
}

/**
 * Which trades a caller reads: the trades sent under the names in `names` (recorded when each was
 * accepted, so they survive a rotation) or under the ids in `ids` (trades recorded before the key
 * had a name); "all" for every trade.
 */
export type Visibility = "all" | { names: readonly string[]; ids: readonly string[] };
