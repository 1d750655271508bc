import type { ConnectRouter } from "@connectrpc/connect";

import type { UseCases } from "../../core/index.js";
import { TokenService } from "../../gen/token/v1/token_pb.js";
import { TokenServiceImpl } from "./token.service.js";

/** The RPC routes: TokenService on /token.v1.TokenService/{Sell,Buy,Remittance,GetPrice}. */
export function tokenRoutes(useCases: UseCases) {
  return (router: ConnectRouter) => {
    router.service(TokenService, new TokenServiceImpl(useCases));
  };
}
