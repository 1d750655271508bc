/**
 * One request to one endpoint: a POST on its keep-alive agent, or a message on its WebSocket,
 * held to the provider's deadline and size cap (rpc-provider.ts says why), parsed, and reported
 * (`onRequest`). A transport failure, or one error for the whole request, is the endpoint's
 * failure (EndpointFailure): the provider then fails over. And what each call of a request is
 * answered: the node's answer to it, matched by id, as its result or as the error ethers would
 * throw for it; a call the node left out of its answer fails (outcomesOf).
 */
import * as http from "node:http";
import * as https from "node:https";

import { makeError, type JsonRpcApiProvider, type JsonRpcError, type JsonRpcPayload, type JsonRpcResult } from "ethers";

import { EndpointFailure, type Endpoint } from "./endpoint.js";

/** One request (a POST, or a WebSocket message) to one endpoint: how many calls it carried, how long it took, how it ended. */
export interface RpcRequestRecord {
  /** The endpoint's redacted URL (EndpointStatus.url). */
  endpoint: string;
  calls: number;
  /** The method of each call, in order (a batch carries several). */
  methods: readonly string[];
  seconds: number;
  /** The transport failed (no answer, timeout, HTTP error, not JSON). */
  failed: boolean;
  /** Calls the node answered with a JSON-RPC error (which never mark an endpoint down). */
  errors: number;
}

/** What a request is held to, and who is told of it: the provider's options (RpcProviderOptions). */
export interface RequestLimits {
  timeoutMs: number;
  maxAnswerBytes: number;
  onRequest: ((request: RpcRequestRecord) => void) | undefined;
}

/**
 * One request to one endpoint (a POST of `body`, or a WebSocket message), parsed. A transport
 * failure comes back as an EndpointFailure.
 */
export async function sendRequest(
  endpoint: Endpoint,
  payload: JsonRpcPayload | JsonRpcPayload[],
  body: string,
  limits: RequestLimits,
): Promise<Array<JsonRpcResult | JsonRpcError>> {
  const started = performance.now();
  const methods = (Array.isArray(payload) ? payload : [payload]).map((call) => call.method);
  const calls = methods.length;
  const record = (failed: boolean, errors: number) =>
    limits.onRequest?.({
      endpoint: endpoint.status().url,
      calls,
      methods,
      seconds: (performance.now() - started) / 1000,
      failed,
      errors,
    });
  let parsed: unknown;
  if (endpoint.ws !== undefined) {
    // Parsed by the connection: it matches answers to requests by id.
    try {
      parsed = await endpoint.ws.exchange(payload, limits.timeoutMs);
    } catch (error) {
      record(true, 0);
      throw new EndpointFailure(error as Error);
    }
  } else {
    let text: string;
    try {
      text = await post(endpoint, body, limits);
    } catch (error) {
      record(true, 0);
      throw new EndpointFailure(error as Error);
    }
    try {
      parsed = JSON.parse(text);
    } catch {
      record(true, 0);
      throw new EndpointFailure(
        makeError("the JSON-RPC node answered something that is not JSON", "SERVER_ERROR", { request: "JSON-RPC" }),
      );
    }
  }
  const answers = (Array.isArray(parsed) ? parsed : [parsed]) as Array<JsonRpcResult | JsonRpcError>;
  const refused = wholeRequestError(parsed, calls);
  if (refused !== undefined) {
    record(true, 0);
    throw new EndpointFailure(refused);
  }
  if (limits.onRequest !== undefined)
    record(
      false,
      answers.reduce((n, answer) => n + ("error" in answer && answer.error !== undefined ? 1 : 0), 0),
    );
  return answers;
}

/** One POST of `body` on the endpoint's keep-alive agent: the answer's text, or the failure. */
export function post(endpoint: Endpoint, body: string, limits: RequestLimits): Promise<string> {
  if (endpoint.agent === undefined) return Promise.reject(new TypeError("not an HTTP endpoint"));
  const client = endpoint.url.protocol === "https:" ? https : http;
  const limit = limits.maxAnswerBytes;
  return new Promise((resolve, reject) => {
    let deadline: NodeJS.Timeout | undefined;
    // Once settled, nothing more: a late error must not destroy a socket the agent reuses.
    let settled = false;
    const succeed = (text: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      resolve(text);
    };
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      reject(error);
      request.destroy();
    };
    // The URL is in no message: providers put API keys in it.
    const tooLarge = () =>
      makeError(`the JSON-RPC node answered more than ${limit} bytes`, "SERVER_ERROR", { request: "JSON-RPC" });
    const request = client.request(
      endpoint.url,
      {
        method: "POST",
        agent: endpoint.agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (response) => {
        if (Number(response.headers["content-length"]) > limit) return fail(tooLarge());
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > limit) fail(tooLarge());
          else chunks.push(chunk);
        });
        response.on("error", fail);
        response.on("end", () => {
          const status = response.statusCode ?? 0;
          // JSON-RPC errors come with 200 (or, from some nodes, 4xx/5xx with a JSON body).
          const text = Buffer.concat(chunks).toString("utf8");
          if (status >= 200 && status < 300) return succeed(text);
          // A rate limit says the endpoint cannot serve us now, whatever its body.
          if (status !== 429 && (text.startsWith("{") || text.startsWith("["))) return succeed(text);
          fail(makeError(`the JSON-RPC node answered HTTP ${status}`, "SERVER_ERROR", { request: "JSON-RPC" }));
        });
      },
    );
    // For the whole request, not the socket's silence: a node that sends a byte now and then
    // would never time out on an idle timeout.
    deadline = setTimeout(
      () =>
        fail(
          makeError(`the JSON-RPC node did not answer within ${limits.timeoutMs} ms`, "TIMEOUT", {
            operation: "request",
            reason: "timeout",
          }),
        ),
      limits.timeoutMs,
    );
    request.on("error", fail);
    request.end(body);
  });
}

/**
 * The node's one error for a whole request, answered instead of an answer per call: a batch
 * answered with an object, or any request answered with an error whose id is null (the node
 * could not tell which call it is about). Undefined for an answer per call.
 */
function wholeRequestError(parsed: unknown, calls: number): Error | undefined {
  const single = Array.isArray(parsed) ? (parsed.length === 1 ? (parsed[0] as unknown) : undefined) : parsed;
  if (single === null || typeof single !== "object" || !("error" in single)) return undefined;
  if (!(calls > 1 && !Array.isArray(parsed)) && (single as { id?: unknown }).id !== null) return undefined;
  const error = (single as { error: unknown }).error;
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return makeError(
    `the JSON-RPC node refused the whole request: ${String(message ?? "no message")} (${String(code ?? "no code")})`,
    "SERVER_ERROR",
    { request: "JSON-RPC", info: { error } },
  );
}

/** One answer of `sendBatch`, in the order of the calls. */
export type RpcOutcome = { result: unknown } | { error: Error };

/** Each call's answer, matched by id: its result, or its error as ethers would throw it (`provider`'s getRpcError). */
export function outcomesOf(
  provider: Pick<JsonRpcApiProvider, "getRpcError">,
  payloads: readonly JsonRpcPayload[],
  answers: ReadonlyArray<JsonRpcResult | JsonRpcError>,
): RpcOutcome[] {
  const byId = new Map(answers.map((answer) => [answer.id, answer]));
  return payloads.map((payload) => {
    const answer = byId.get(payload.id);
    if (answer === undefined)
      return {
        error: makeError("the node did not answer this call of the batch", "BAD_DATA", { value: payload.method }),
      };
    if ("error" in answer) return { error: provider.getRpcError(payload, answer) };
    return { result: answer.result };
  });
}
