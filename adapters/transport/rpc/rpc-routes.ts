import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";

import type { UseCases } from "../../../core/index.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { answerUndecodableRequestsAsInvalid } from "./request-errors.js";
import { TokenServiceImpl, tokenCalls, type TokenCalls } from "./token.service.js";

/** The RPC routes: TokenService on /tokentrade.v1.TokenService/{Sell,Buy,Remittance,GetPrice,GetTrade,ListTrades,GetTradeSummary}. */
export function tokenRoutes(useCases: UseCases, calls: TokenCalls = tokenCalls(useCases)) {
  return (router: ConnectRouter) => {
    router.service(TokenService, new TokenServiceImpl(useCases, calls));
    answerUndecodableRequestsAsInvalid(router.handlers as UniversalHandler[]);
  };
}
