/**
 * New heads pushed by the node: `eth_subscribe ["newHeads"]` on the endpoint calls go to, when
 * it is a WebSocket one (ws:// or wss:// in RPC_URL; never on another endpoint: its heads would
 * be set against another node's receipts and state), each header handed to the listeners (the block watcher,
 * which then need not ask for the head). A notification is not a call: it costs nothing.
 *
 * The subscription lives on one connection: when that closes, listeners are told it is lost
 * (the watcher polls meanwhile), and it is made again, on the first healthy WebSocket endpoint
 * then, as soon as one of their connections opens again, else after a wait that doubles from
 * `retryMs` up to a minute while attempts fail. A node that refuses eth_subscribe (a JSON-RPC
 * error: not offered, not allowed) is asked again after ten minutes. Subscribed only while
 * someone listens; the last listener gone, it is cancelled (eth_unsubscribe).
 *
 * Not caught: a node that keeps the connection but stops pushing. The watcher's safety poll
 * (block-watcher.ts) bounds what that costs.
 */
import { isChainUnreachable } from "./chain-errors.js";
import type { WsTransport } from "./ws-transport.js";

/** A block header as eth_getBlockByNumber gives it (the fields the fee market is read from). */
export interface HeadBlock {
  number: string;
  hash: string;
  timestamp: string;
  baseFeePerGas?: string;
  gasUsed: string;
  gasLimit: string;
}

/** A header as newHeads pushes it (the fields used): eth_getBlockByNumber's, without the transactions. */
export interface PushedHead extends HeadBlock {
  parentHash: string;
}

/** Where pushed heads come from: RpcProvider.heads with a WebSocket endpoint, or a test's. */
export interface PushedHeads {
  /** Whether heads are being pushed now (subscribed, on an open connection). */
  readonly subscribed: boolean;
  /**
   * `onHead` gets each header pushed; `onChange`, whether heads are pushed, each time that
   * changes. Answers how to stop listening.
   */
  onHead(onHead: (head: PushedHead) => void, onChange?: (subscribed: boolean) => void): () => void;
}

/** A WebSocket endpoint to subscribe on. */
export interface SubscriptionEndpoint {
  transport: WsTransport;
  /** One call to this endpoint alone: its result; throws its JSON-RPC error, or the transport's failure. */
  call(method: string, params: unknown[]): Promise<unknown>;
}

export interface HeadSubscriptionOptions {
  /** The WebSocket endpoints, healthy ones first, each in the configured order. */
  endpoints(): SubscriptionEndpoint[];
  /** The first wait before subscribing again after a failed attempt, in ms. */
  retryMs: number;
}

const MAX_RETRY_MS = 60_000;
/** A node that refused eth_subscribe is asked again after this long, in ms. */
const REFUSED_RETRY_MS = 600_000;

interface Listener {
  onHead: (head: PushedHead) => void;
  onChange: ((subscribed: boolean) => void) | undefined;
}

const QUANTITY = /^0x[0-9a-f]+$/i;
const HASH = /^0x[0-9a-f]{64}$/i;

/**
 * What a newHeads notification must hold to be a header the watcher and the fee oracle can read
 * (eth_getBlockByNumber's fields; every node pushes them): one without is not handed on.
 */
function isHeader(value: unknown): value is PushedHead {
  if (value === null || typeof value !== "object") return false;
  const header = value as Record<string, unknown>;
  const quantity = (name: string) => typeof header[name] === "string" && QUANTITY.test(header[name]);
  return (
    typeof header.hash === "string" &&
    HASH.test(header.hash) &&
    typeof header.parentHash === "string" &&
    HASH.test(header.parentHash) &&
    ["number", "timestamp", "gasUsed", "gasLimit"].every(quantity) &&
    (header.baseFeePerGas === undefined || quantity("baseFeePerGas"))
  );
}

export class HeadSubscription implements PushedHeads {
  readonly #options: HeadSubscriptionOptions;
  readonly #listeners = new Set<Listener>();
  /** The live subscription: its connection, its id, and how to stop hearing it. */
  #current: { transport: WsTransport; id: string; stop: () => void } | undefined;
  #attempting = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryMs: number;
  #destroyed = false;

  constructor(transports: readonly WsTransport[], options: HeadSubscriptionOptions) {
    this.#options = options;
    this.#retryMs = options.retryMs;
    // A connection that opens again: subscribed again at once.
    for (const transport of transports)
      transport.onState((open) => {
        if (open && this.#current === undefined) this.#subscribe();
      });
  }

  get subscribed(): boolean {
    return this.#current !== undefined;
  }

  onHead(onHead: (head: PushedHead) => void, onChange?: (subscribed: boolean) => void): () => void {
    const listener: Listener = { onHead, onChange };
    this.#listeners.add(listener);
    if (this.#listeners.size === 1) this.#subscribe();
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0) return;
      clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
      const current = this.#current;
      if (current === undefined) return;
      this.#current = undefined;
      current.stop();
      const endpoint = this.#options.endpoints().find((candidate) => candidate.transport === current.transport);
      endpoint?.call("eth_unsubscribe", [current.id]).catch(() => {});
    };
  }

  /**
   * The endpoint calls go to changed (one went down, or came back): a subscription on another
   * endpoint's connection is dropped (listeners are told, and poll meanwhile), and one is made on
   * the new first endpoint when it is a WebSocket one.
   */
  reconsider(): void {
    const first = this.#options.endpoints()[0];
    const current = this.#current;
    if (current !== undefined && first?.transport !== current.transport) {
      this.#current = undefined;
      current.stop();
      const endpoint = this.#options.endpoints().find((candidate) => candidate.transport === current.transport);
      endpoint?.call("eth_unsubscribe", [current.id]).catch(() => {});
      for (const listener of this.#listeners) listener.onChange?.(false);
    }
    if (this.#current === undefined) {
      clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
      this.#subscribe();
    }
  }

  /** Stops for good (the provider is destroyed). */
  destroy(): void {
    this.#destroyed = true;
    clearTimeout(this.#retryTimer);
    this.#current?.stop();
    this.#current = undefined;
    this.#listeners.clear();
  }

  #wanted(): boolean {
    return !this.#destroyed && this.#listeners.size > 0;
  }

  #subscribe(): void {
    if (!this.#wanted() || this.#current !== undefined || this.#attempting) return;
    const endpoint = this.#options.endpoints()[0];
    if (endpoint === undefined) return;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#attempting = true;
    void this.#attempt(endpoint).finally(() => {
      this.#attempting = false;
    });
  }

  async #attempt({ transport, call }: SubscriptionEndpoint): Promise<void> {
    // Heard from before the answer: a node may push a header in the same read as its answer.
    let id: string | undefined;
    const early: unknown[] = [];
    const stopHearing = transport.onNotification((params) => {
      if (id === undefined) early.push(params);
      else this.#notified(id, params);
    });
    let closed = false;
    const stopWatching = transport.onState((open) => {
      if (open) return;
      closed = true;
      if (this.#current?.transport === transport) this.#lost();
    });
    const stop = () => {
      stopHearing();
      stopWatching();
    };
    let answer: unknown;
    try {
      answer = await call("eth_subscribe", ["newHeads"]);
      if (typeof answer !== "string") throw new Error("eth_subscribe answered no subscription id");
    } catch (error) {
      stop();
      this.#retry(isChainUnreachable(error) ? this.#backoff() : REFUSED_RETRY_MS);
      return;
    }
    if (!this.#wanted() || closed) {
      stop();
      if (closed) this.#retry(this.#backoff());
      else if (!this.#destroyed) call("eth_unsubscribe", [answer]).catch(() => {});
      return;
    }
    id = answer;
    this.#current = { transport, id, stop };
    this.#retryMs = this.#options.retryMs;
    for (const listener of this.#listeners) listener.onChange?.(true);
    for (const params of early.splice(0)) this.#notified(id, params);
  }

  #notified(id: string, params: unknown): void {
    if (params === null || typeof params !== "object") return;
    const { subscription, result } = params as { subscription?: unknown; result?: unknown };
    if (subscription !== id || !isHeader(result) || this.#current?.id !== id) return;
    for (const listener of this.#listeners) {
      try {
        listener.onHead(result);
      } catch {
        // one listener's failure is not the others'
      }
    }
  }

  /** The connection holding the subscription closed. */
  #lost(): void {
    const current = this.#current;
    if (current === undefined) return;
    this.#current = undefined;
    current.stop();
    for (const listener of this.#listeners) listener.onChange?.(false);
    // Its connection opening again subscribes at once; another endpoint is tried after a wait.
    this.#retry(this.#backoff());
  }

  /** The wait before the next attempt, doubled for the one after. */
  #backoff(): number {
    const wait = this.#retryMs;
    this.#retryMs = Math.min(this.#retryMs * 2, MAX_RETRY_MS);
    return wait;
  }

  #retry(ms: number): void {
    if (!this.#wanted()) return;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#subscribe();
    }, ms);
    this.#retryTimer.unref();
  }
}
