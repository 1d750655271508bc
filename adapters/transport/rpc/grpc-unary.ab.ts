/**
 * The records bench's A/B switch for decision 0007 (docs/decisions/0007-lean-grpc-unary-path.md):
 * loaded in place of grpc-unary.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). With the switch on, the lean path takes no call: its handler returns false at once,
 * having touched nothing, and the procedure's route hands every call to Connect, as
 * `createHttpHandler`'s `grpcFastPath: false` makes it. Off, the lean path takes what it takes.
 * Each call it took is counted ("0007 lean"); each it declined or left to Connect is not.
 */
import { tally, usesLibrary } from "../../shared/records.ab.js";
import { grpcUnary as replacement, type GrpcUnaryHandler, type GrpcUnaryOptions } from "./grpc-unary.js";

export type { GrpcUnaryHandler, GrpcUnaryOptions };

export function grpcUnary(options: GrpcUnaryOptions): GrpcUnaryHandler {
  const lean = replacement(options);
  return (req, res, context) => {
    if (usesLibrary("0007")) return false;
    const took = lean(req, res, context);
    if (took) tally("0007 lean", 1);
    return took;
  };
}
