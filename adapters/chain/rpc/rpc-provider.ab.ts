/**
 * The records bench's A/B switch for decision 0004 (docs/decisions/0004-json-rpc-provider.md):
 * loaded in place of rpc-provider.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). With the switch on, every call goes through ethers' own `JsonRpcProvider`: its
 * batching (the same stall and most calls a request as the service's) and its `FetchRequest`
 * (with the service's deadline), and the service's request metrics are told of each request, as
 * `RpcProvider` tells them. Off, through `RpcProvider`'s transport and batching.
 *
 * What ethers' provider cannot stand in for: several endpoints in order with failover, a
 * WebSocket with pushed heads, and signed transactions handed to the other endpoints. So the
 * switch serves one http(s) endpoint only (the bench's embedded chain), and the provider around
 * it stays the service's, for what the trade path asks of it besides calls:
 * - `sendBatch` (a round's sends and its receipts, in order): the calls made one after the
 *   other in the same tick, which ethers' queue sends as one batch, in order;
 * - `sendBatchToEach` (a lost send's evidence): that batch, answered for the one endpoint;
 * - a transport failure then fails each call of the batch, where `RpcProvider.sendBatch` throws
 *   (the bench's chain does not fail).
 * Either way each request and its calls are counted.
 */
import {
  FetchRequest,
  JsonRpcProvider,
  Network,
  type JsonRpcError,
  type JsonRpcPayload,
  type JsonRpcResult,
} from "ethers";

import { tally, usesLibrary } from "../../shared/records.ab.js";
import type { RpcProviderOptions } from "./provider-options.js";
import type { RpcOutcome, RpcRequestRecord } from "./request.js";
import { RpcProvider as Replacement } from "./rpc-provider.js";

/** ethers' JsonRpcProvider, telling the service's metrics of each request as RpcProvider does. */
class Library extends JsonRpcProvider {
  readonly #endpoint: string;
  readonly #onRequest: ((request: RpcRequestRecord) => void) | undefined;

  constructor(url: string, endpoint: string, options: RpcProviderOptions) {
    const request = new FetchRequest(url);
    request.timeout = options.timeoutMs ?? 10_000;
    const network = options.chainId === undefined ? undefined : Network.from(options.chainId);
    super(request, network, {
      ...(network === undefined ? {} : { staticNetwork: network }),
      cacheTimeout: -1,
      batchStallTime: options.batchStallMs ?? 1,
      batchMaxCount: Math.max(1, options.batchMaxCount ?? 100),
    });
    this.#endpoint = endpoint;
    this.#onRequest = options.onRequest;
  }

  override async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<JsonRpcResult[]> {
    const started = performance.now();
    const methods = (Array.isArray(payload) ? payload : [payload]).map((call) => call.method);
    tally("0004 requests", 1);
    tally("0004 calls", methods.length);
    const record = (failed: boolean, errors: number) =>
      this.#onRequest?.({
        endpoint: this.#endpoint,
        calls: methods.length,
        methods,
        seconds: (performance.now() - started) / 1000,
        failed,
        errors,
      });
    try {
      const answers = await super._send(payload);
      // ethers types the answers as results; a node answers errors among them too.
      record(false, (answers as Array<JsonRpcResult | JsonRpcError>).filter((answer) => "error" in answer).length);
      return answers;
    } catch (error) {
      record(true, 0);
      throw error;
    }
  }
}

export class RpcProvider extends Replacement {
  readonly #library: Library | undefined;

  constructor(urls: string | readonly string[], options: RpcProviderOptions = {}) {
    super(urls, options);
    const list = typeof urls === "string" ? [urls] : urls;
    const endpoint = this.endpoints()[0]?.url;
    if (list.length === 1 && /^https?:/i.test(list[0]!) && endpoint !== undefined)
      this.#library = new Library(list[0]!, endpoint, options);
  }

  /** ethers' provider while the switch is on; undefined while off. */
  #now(): Library | undefined {
    if (!usesLibrary("0004")) return undefined;
    if (this.#library === undefined)
      throw new Error("ethers' JsonRpcProvider serves one http(s) endpoint: no failover, no WebSocket");
    return this.#library;
  }

  override send(method: string, params: unknown[] | Record<string, unknown>): Promise<unknown> {
    return this.#now()?.send(method, params) ?? super.send(method, params);
  }

  override async _send(payload: JsonRpcPayload | JsonRpcPayload[]): Promise<Array<JsonRpcResult | JsonRpcError>> {
    const library = this.#now();
    if (library !== undefined) return library._send(payload);
    tally("0004 requests", 1);
    tally("0004 calls", Array.isArray(payload) ? payload.length : 1);
    return super._send(payload);
  }

  override async sendBatch(calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<RpcOutcome[]> {
    const library = this.#now();
    if (library === undefined) return super.sendBatch(calls);
    const settled = await Promise.allSettled(calls.map(({ method, params }) => library.send(method, params)));
    return settled.map((outcome) =>
      outcome.status === "fulfilled" ? { result: outcome.value } : { error: outcome.reason as Error },
    );
  }

  override async sendBatchToEach(
    calls: ReadonlyArray<{ method: string; params: unknown[] }>,
  ): Promise<Array<RpcOutcome[] | Error>> {
    if (this.#now() === undefined) return super.sendBatchToEach(calls);
    return [await this.sendBatch(calls)];
  }

  override destroy(): void {
    this.#library?.destroy();
    super.destroy();
  }
}
