import { createContextKey, type ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";

import { codeName, toConnectError } from "./error-map.js";

/** The request's logger (carrying its request id), set by the HTTP handler for every RPC. */
export const kRequestLog = createContextKey<Logger | undefined>(undefined, { description: "request logger" });

/** Where an RPC's outcome is written for the request metrics: "ok", or the error code's name. */
export const kRpcOutcome = createContextKey<{ code?: string } | undefined>(undefined, { description: "rpc outcome" });

/**
 * The one error handler of the RPCs: maps whatever the handler or an inner
 * interceptor throws with rpcError, and rethrows the mapped error.
 */
export function errorInterceptor(fallbackLog: Logger): Interceptor {
  return (next) => async (req) => {
    const outcome = req.contextValues.get(kRpcOutcome);
    try {
      const answer = await next(req);
      if (outcome) outcome.code = "ok";
      return answer;
    } catch (thrown) {
      throw rpcError(
        thrown,
        req.contextValues.get(kRequestLog) ?? fallbackLog,
        `${req.service.typeName}/${req.method.name}`,
        outcome,
      );
    }
  };
}

/**
 * What an RPC that threw answers, for Connect's handlers and the lean gRPC path alike: the
 * thrown value mapped with toConnectError, its code written to `outcome` (the request
 * metrics), and a log line with the request id: the whole error with its stack for a bug,
 * whose message to the client is generic; the code and message otherwise.
 */
export function rpcError(thrown: unknown, log: Logger, procedure: string, outcome?: { code?: string }): ConnectError {
  const { error, internal } = toConnectError(thrown);
  if (outcome) outcome.code = codeName(error.code);
  if (internal) {
    log.error({ err: thrown, procedure }, "rpc failed with an unexpected error");
  } else {
    log.info({ code: codeName(error.code), reason: error.rawMessage, procedure }, "rpc refused");
  }
  return error;
}
