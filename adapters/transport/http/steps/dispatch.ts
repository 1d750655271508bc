/**
 * Step 6, dispatch: a request that passed the steps before goes to its protocol's handler:
 * - TokenService's RPCs (/tokentrade.v1.TokenService/*): gRPC to the lean path when it takes the
 *   call, anything else (Connect, gRPC-Web binary and text, what the lean path hands over) to Connect;
 * - gRPC health and reflection, without a key;
 * - /docs;
 * - anything else to the fallback: an RPC this server does not have gets its protocol's
 *   "unimplemented", the rest the JSON routes (which send the x-request-id header with their others).
 */
import { minimalGrpcMessageEncoding } from "../../rpc/index.js";
import type { ApiKeyCheck, NodeServerRequest, NodeServerResponse, RequestContext } from "../../request/index.js";
import type { ProtocolHandlers } from "../protocol-handlers.js";
import { RPC_PATH_PREFIX, isEcosystemPath } from "../protocol-of.js";
import { rpcOutcome } from "./observe.js";

export type DispatchStep = (
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  key: ApiKeyCheck | undefined,
) => void;

export function dispatchStep(handlers: ProtocolHandlers): DispatchStep {
  const { connect, lean, ecosystem, docs, fallback } = handlers;
  return (req, res, context, key) => {
    const { path } = context;
    if (path.startsWith(RPC_PATH_PREFIX)) {
      res.setHeader("x-request-id", context.id);
      // The api_key step has refused the call without a valid key: the lean path gets its scope.
      if (lean !== undefined && key?.ok && lean(req, res, key.caller ?? { id: key.scope }, rpcOutcome(req))) return;
      minimalGrpcMessageEncoding(req, res);
      connect(req, res);
    } else if (isEcosystemPath(path)) {
      res.setHeader("x-request-id", context.id);
      minimalGrpcMessageEncoding(req, res);
      ecosystem(req, res);
    } else if (!docs(req, res, path)) {
      fallback(req, res);
    }
  };
}
