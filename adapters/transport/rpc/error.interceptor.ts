import type { ConnectError, Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";

import { codeName, toConnectError } from "./error-map.js";
import { kRequestContext } from "./request-values.js";

/** Where an RPC's outcome is written for the request metrics (its RequestContext): "ok", or the error code's name. */
export interface RpcOutcome {
  rpcCode: string | undefined;
}

/**
 * The one error handler of the RPCs: maps whatever the handler or an inner interceptor throws
 * with rpcError, and rethrows the mapped error; the outcome goes to the request's context.
 */
export function errorInterceptor(fallbackLog: Logger): Interceptor {
  return (next) => async (req) => {
    const context = req.contextValues.get(kRequestContext);
    try {
      const answer = await next(req);
      if (context) context.rpcCode = "ok";
      return answer;
    } catch (thrown) {
      throw rpcError(thrown, context?.log ?? fallbackLog, `${req.service.typeName}/${req.method.name}`, context);
    }
  };
}

/**
 * What an RPC that threw answers, for Connect's handlers and the lean gRPC path alike: the
 * thrown value mapped with toConnectError, its code written to `outcome` (the request
 * metrics), and a log line with the request id: the whole error with its stack for a bug,
 * whose message to the client is generic; the code and message otherwise.
 */
export function rpcError(thrown: unknown, log: Logger, procedure: string, outcome?: RpcOutcome): ConnectError {
  const { error, internal } = toConnectError(thrown);
  if (outcome) outcome.rpcCode = codeName(error.code);
  if (internal) {
    log.error({ err: thrown, procedure }, "rpc failed with an unexpected error");
  } else {
    log.info({ code: codeName(error.code), reason: error.rawMessage, procedure }, "rpc refused");
  }
  return error;
}
