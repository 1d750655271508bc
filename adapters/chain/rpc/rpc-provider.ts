/**
 * The service's JSON-RPC provider: ethers' JsonRpcApiProvider over one keep-alive
 * node:http(s) agent, batching concurrent calls into one request.
 *
 * Why not ethers' JsonRpcProvider: its FetchRequest builds a new request object, checks
 * and throttles per call, where this class makes one POST on a keep-alive connection; and a
 * burst's calls cost far less in one request than one request each. Calls made in the same
 * few milliseconds (the preflights of a burst of trades) go out together; a lone call waits
 * `batchStallMs` at most. The batching is this class's own (`send`): ethers' re-serializes
 * the growing batch once per call it adds, and looks each answer up with a linear scan, which
 * is quadratic in the batch's size. Measurements: docs/decisions/0004-json-rpc-provider.md.
 *
 * `sendBatch` sends JSON-RPC calls in one request, in order, outside ethers' queue: the
 * trade adapter broadcasts a run of consecutive nonces with it, so that they reach the
 * node in nonce order and cost one round trip. Neither kind of batch holds more than
 * `batchMaxCount` calls (RPC_BATCH_SIZE): hosted providers refuse larger ones.
 *
 * A request has `timeoutMs` in all to be answered, connecting and reading included (a node
 * that trickles its answer a byte at a time still times out), and its answer at most
 * `maxAnswerBytes`. A node that answers one error for a whole request (a batch over its
 * limit, a rate limit, a body it could not read) answered none of the calls: each fails
 * with that error, and it is the endpoint's failure like an HTTP error page.
 *
 * Several endpoints (RPC_URL="https://a,https://b"): a request goes to the first endpoint
 * that is up, in the order given, and fails over to the next on a transport failure (no
 * connection, a reset, a timeout, an HTTP error without a JSON-RPC body, 429, an answer that
 * is not JSON or is too large, one error for the whole request). A failed endpoint rests, and only a health probe (eth_chainId, which must
 * still answer the pinned chain id) brings it back: no trade waits on an endpoint known to be
 * down. A JSON-RPC error ("nonce too low", "execution reverted") is the node's answer about
 * the call, not about the endpoint, and never marks it down; OpenZeppelin Relayer deadlocked
 * on exactly that (issue #681). Every signed transaction is also handed to every other
 * endpoint that is up, so that it reaches the network even when one provider drops it.
 * Retrying a request on another endpoint is safe: the service only reads, and sends signed
 * transactions, which a second node takes or knows already.
 *
 * A WebSocket endpoint (ws:// or wss://, ws-transport.ts) carries the same requests, one message
 * each, over one connection, with the same deadline, size cap, failover and errors: a connection
 * that closes before an answer came fails the request as a dropped HTTP connection does (the
 * node may have taken its calls). It also pushes new heads (`heads`, head-subscription.ts), on
 * the first healthy WebSocket endpoint; notifications are not requests (`onRequest` sees none).
 */
import {
  JsonRpcApiProvider,
  Network,
  makeError,
  type JsonRpcError,
  type JsonRpcPayload,
  type JsonRpcResult,
} from "ethers";

import { Endpoint, EndpointFailure, MAX_REST_MS, describe, type EndpointStatus } from "./endpoint.js";
import { HeadSubscription, type PushedHeads } from "./head-subscription.js";
import type { RpcProviderOptions } from "./provider-options.js";
import {
  outcomesOf,
  post,
  sendRequest,
  type RequestLimits,
  type RpcOutcome,
  type RpcRequestRecord,
} from "./request.js";

/** Far above any answer the service asks for (a batch of receipts), far below what would hurt the process. */
const DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** What a call gets once the provider is destroyed: ethers' own error for it. */
function destroyedError(method: string): Error {
  return makeError("provider destroyed; cancelled request", "UNSUPPORTED_OPERATION", { operation: method });
}

/** A call waiting for its batch. */
interface QueuedCall {
  payload: JsonRpcPayload;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
}

export class RpcProvider extends JsonRpcApiProvider {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  readonly #maxAnswerBytes: number;
  readonly #restMs: number;
  readonly #onEndpointChange: ((change: EndpointStatus) => void) | undefined;
  readonly #onRequest: ((request: RpcRequestRecord) => void) | undefined;
  readonly #chainId: bigint | undefined;
  readonly #batchMaxCount: number;
  readonly #batchStallMs: number;
  readonly #queued: QueuedCall[] = [];
  #drainTimer: NodeJS.Timeout | undefined;
  #nextId = 1;
  readonly #heads: HeadSubscription | undefined;
  /** What each request is held to, and who is told of it (request.ts). */
  readonly #limits: RequestLimits;

  /** @param urls one endpoint, or several in order of preference */
  constructor(urls: string | readonly string[], options: RpcProviderOptions = {}) {
    const network = options.chainId === undefined ? undefined : Network.from(options.chainId);
    super(network, {
      staticNetwork: network ?? false,
      // Every read is fresh: a cached nonce or preflight would be stale.
      cacheTimeout: -1,
    });
    const list = typeof urls === "string" ? [urls] : [...urls];
    if (list.length === 0) throw new TypeError("RPC_URL: at least one URL is required");
    this.#maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    this.#restMs = options.restMs ?? 2_000;
    this.#endpoints = list.map((url) => {
      const parsed = new URL(url);
      if (!["http:", "https:", "ws:", "wss:"].includes(parsed.protocol))
        throw new TypeError("RPC_URL: must be an http:, https:, ws: or wss: URL");
      return new Endpoint(parsed, options.maxSockets ?? 8, {
        maxAnswerBytes: this.#maxAnswerBytes,
        restMs: this.#restMs,
      });
    });
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#onEndpointChange = options.onEndpointChange;
    this.#onRequest = options.onRequest;
    this.#chainId = options.chainId;
    this.#batchMaxCount = Math.max(1, options.batchMaxCount ?? 100);
    this.#batchStallMs = options.batchStallMs ?? 1;
    this.#limits = { timeoutMs: this.#timeoutMs, maxAnswerBytes: this.#maxAnswerBytes, onRequest: this.#onRequest };
    const sockets = this.#endpoints.filter((endpoint) => endpoint.ws !== undefined);
    this.#heads =
      sockets.length === 0
        ? undefined
        : new HeadSubscription(
            sockets.map((endpoint) => endpoint.ws!),
            {
              // Only the endpoint calls go to: heads from another node (a fork, a lagging one)
              // would be set against receipts and state read from this one.
              endpoints: () =>
                this.#order()
                  .slice(0, 1)
                  .filter((endpoint) => endpoint.ws !== undefined)
                  .map((endpoint) => ({
                    transport: endpoint.ws!,
                    call: (method, params) => this.#callOn(endpoint, method, params),
                  })),
              retryMs: this.#restMs,
            },
          );
  }

  /**
   * Heads pushed by the first healthy WebSocket endpoint (eth_subscribe newHeads); undefined
   * without a WebSocket endpoint (the block watcher then polls). A getter, not a field: the
   * provider has no own enumerable state (ethers' objects that hold it compare as before).
   */
  get heads(): PushedHeads | undefined {
    return this.#heads;
  }

  /**
   * One JSON-RPC call; every ethers method of this provider comes through here. Calls made
   * within `batchStallMs` of each other share a request (up to `batchMaxCount` of them).
   */
  override send(method: string, params: unknown[] | Record<string, unknown>): Promise<unknown> {
    if (this.destroyed) {
      return Promise.reject(destroyedError(method));
    }
    return new Promise((resolve, reject) => {
      this.#queued.push({ payload: { jsonrpc: "2.0", id: this.#nextId++, method, params }, resolve, reject });
      if (this.#queued.length >= this.#batchMaxCount) this.#drain();
      else this.#drainTimer ??= setTimeout(() => this.#drain(), this.#batchMaxCount === 1 ? 0 : this.#batchStallMs);
    });
  }

  #drain(): void {
    clearTimeout(this.#drainTimer);
    this.#drainTimer = undefined;
    while (this.#queued.length > 0) void this.#sendQueued(this.#queued.splice(0, this.#batchMaxCount));
  }

  async #sendQueued(calls: QueuedCall[]): Promise<void> {
    let answers: Array<JsonRpcResult | JsonRpcError>;
    try {
      answers = await this._send(calls.length === 1 ? calls[0]!.payload : calls.map((call) => call.payload));
    } catch (error) {
      for (const call of calls) call.reject(error);
      return;
    }
    const outcomes = outcomesOf(
      this,
      calls.map((call) => call.payload),
      answers,
    );
    calls.forEach(({ payload, resolve, reject }, i) => {
      const outcome = outcomes[i]!;
      if (this.destroyed) reject(destroyedError(payload.method));
      else if ("error" in outcome) reject(outcome.error);
      else resolve(outcome.result);
    });
  }

  /**
   * The transport under ethers' queue (and under `sendBatch`): one POST and its JSON answer,
   * from the first endpoint that is up, failing over to the next on a transport failure.
   * Signed transactions in it then go to every other endpoint that is up, unawaited.
   */
  override async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<Array<JsonRpcResult | JsonRpcError>> {
    const body = JSON.stringify(payload);
    let failure: Error | undefined;
    for (const endpoint of this.#order()) {
      if (this.destroyed) break;
      try {
        const answers = await this.#request(endpoint, payload, body);
        this.#spread(endpoint, Array.isArray(payload) ? payload : [payload]);
        return answers;
      } catch (error) {
        if (!(error instanceof EndpointFailure)) throw error;
        failure = error.cause;
        this.#markDown(endpoint, error.cause);
      }
    }
    throw failure ?? destroyedError(Array.isArray(payload) ? (payload[0]?.method ?? "batch") : payload.method);
  }

  /** Every endpoint as it stands: up, or down and why. */
  endpoints(): EndpointStatus[] {
    return this.#endpoints.map((endpoint) => endpoint.status());
  }

  /** The endpoints to try, in order: those up as configured, then those resting (all down: try anyway). */
  #order(): Endpoint[] {
    const up = this.#endpoints.filter((endpoint) => endpoint.up);
    return up.length === this.#endpoints.length ? up : [...up, ...this.#endpoints.filter((endpoint) => !endpoint.up)];
  }

  /**
   * One request to one endpoint (a POST of `body`, or a WebSocket message), parsed. A transport
   * failure comes back as an EndpointFailure.
   */
  #request(
    endpoint: Endpoint,
    payload: JsonRpcPayload | JsonRpcPayload[],
    body = JSON.stringify(payload),
  ): Promise<Array<JsonRpcResult | JsonRpcError>> {
    return sendRequest(endpoint, payload, body, this.#limits);
  }

  /** Hands the signed transactions among `payloads` to every other endpoint that is up. Their answers do not matter. */
  #spread(sentTo: Endpoint, payloads: readonly JsonRpcPayload[]): void {
    if (this.#endpoints.length === 1) return;
    const raw = payloads.filter((payload) => payload.method === "eth_sendRawTransaction");
    if (raw.length === 0) return;
    const copies = raw.map((payload) => ({ ...payload, id: this.#nextId++ }));
    const body = JSON.stringify(copies);
    for (const endpoint of this.#endpoints) {
      if (endpoint === sentTo || !endpoint.up) continue;
      const sent =
        endpoint.ws !== undefined ? endpoint.ws.exchange(copies, this.#timeoutMs) : post(endpoint, body, this.#limits);
      sent.catch((error: unknown) => this.#markDown(endpoint, error as Error));
    }
  }

  /** Rests a failing endpoint; a probe after the rest decides whether it is back. */
  #markDown(endpoint: Endpoint, cause: Error): void {
    if (this.destroyed) return;
    const wasUp = endpoint.up;
    endpoint.up = false;
    endpoint.reason = describe(cause);
    if (!wasUp) return; // already resting, its probe is scheduled
    endpoint.restMs = this.#restMs;
    this.#onEndpointChange?.(endpoint.status());
    this.#heads?.reconsider(); // calls go elsewhere now: so do the heads
    this.#scheduleProbe(endpoint);
  }

  #scheduleProbe(endpoint: Endpoint): void {
    clearTimeout(endpoint.probeTimer);
    endpoint.probeTimer = setTimeout(() => void this.#probe(endpoint), endpoint.restMs);
    endpoint.probeTimer.unref();
  }

  /** eth_chainId on a resting endpoint: back up when it answers the pinned chain, else rests twice as long. */
  async #probe(endpoint: Endpoint): Promise<void> {
    if (this.destroyed) return;
    try {
      const [answer] = await this.#request(endpoint, {
        jsonrpc: "2.0",
        id: this.#nextId++,
        method: "eth_chainId",
        params: [],
      });
      if (answer === undefined || !("result" in answer)) throw new Error("it did not answer eth_chainId");
      if (this.#chainId !== undefined && BigInt(answer.result as string) !== this.#chainId) {
        throw new Error(`it serves chain ${BigInt(answer.result as string)}, not ${this.#chainId}`);
      }
    } catch (error) {
      if (this.destroyed) return;
      endpoint.reason = describe(error instanceof EndpointFailure ? error.cause : (error as Error));
      endpoint.restMs = Math.min(endpoint.restMs * 2, MAX_REST_MS);
      this.#scheduleProbe(endpoint);
      return;
    }
    if (this.destroyed) return;
    endpoint.up = true;
    endpoint.reason = undefined;
    this.#onEndpointChange?.(endpoint.status());
    this.#heads?.reconsider();
  }

  /**
   * Sends `calls` in one request, in this order (in several, one after the other, when there
   * are more than `batchMaxCount`); answers each call's result or error (as ethers would throw
   * it). Throws only when the first request fails: then the node may have received any of its
   * calls, or none. A later request that fails answers each of its calls, and each call after
   * it (never sent), with that failure.
   */
  async sendBatch(calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<RpcOutcome[]> {
    if (calls.length === 0) return [];
    const payloads = this.#payloads(calls);
    const outcomes: RpcOutcome[] = [];
    for (let start = 0; start < payloads.length; start += this.#batchMaxCount) {
      const chunk = payloads.slice(start, start + this.#batchMaxCount);
      try {
        outcomes.push(...outcomesOf(this, chunk, await this._send(chunk)));
      } catch (error) {
        if (start === 0) throw error;
        for (let i = start; i < payloads.length; i++) outcomes.push({ error: error as Error });
        break;
      }
    }
    return outcomes;
  }

  /**
   * Sends `calls` to every endpoint, resting ones included, one request each, at once; answers,
   * per endpoint, each call's outcome, or the transport failure that stopped the request. The
   * lookups that decide whether a transaction the service signed is known anywhere go through
   * here: the endpoint that took a send and lost its answer is the one just marked down.
   */
  async sendBatchToEach(
    calls: ReadonlyArray<{ method: string; params: unknown[] }>,
  ): Promise<Array<RpcOutcome[] | Error>> {
    const payloads = this.#payloads(calls);
    const body = JSON.stringify(payloads);
    return Promise.all(
      this.#endpoints.map(async (endpoint) => {
        try {
          return outcomesOf(this, payloads, await this.#request(endpoint, payloads, body));
        } catch (error) {
          if (!(error instanceof EndpointFailure)) return error as Error;
          this.#markDown(endpoint, error.cause);
          return error.cause;
        }
      }),
    );
  }

  /**
   * One call to `endpoint` alone (no batching, no failover): its result; throws its JSON-RPC
   * error, or the transport's failure (the endpoint then rests). The head subscription's calls,
   * which belong to one connection.
   */
  async #callOn(endpoint: Endpoint, method: string, params: unknown[]): Promise<unknown> {
    if (this.destroyed) throw destroyedError(method);
    const payload: JsonRpcPayload = { jsonrpc: "2.0", id: this.#nextId++, method, params };
    let answers: Array<JsonRpcResult | JsonRpcError>;
    try {
      answers = await this.#request(endpoint, payload);
    } catch (error) {
      if (!(error instanceof EndpointFailure)) throw error;
      this.#markDown(endpoint, error.cause);
      throw error.cause;
    }
    const [outcome] = outcomesOf(this, [payload], answers);
    if ("error" in outcome!) throw outcome.error;
    return outcome!.result;
  }

  /** `calls` as JSON-RPC payloads, each with a fresh id. */
  #payloads(calls: ReadonlyArray<{ method: string; params: unknown[] }>): JsonRpcPayload[] {
    return calls.map(({ method, params }) => ({ jsonrpc: "2.0", id: this.#nextId++, method, params }));
  }

  override destroy(): void {
    clearTimeout(this.#drainTimer);
    for (const call of this.#queued.splice(0)) {
      call.reject(destroyedError(call.payload.method));
    }
    this.#heads?.destroy();
    for (const endpoint of this.#endpoints) {
      clearTimeout(endpoint.probeTimer);
      endpoint.agent?.destroy();
      endpoint.ws?.destroy();
    }
    super.destroy();
  }
}
