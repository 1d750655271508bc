/**
 * Decision 0006 (docs/decisions/0006-grpc-message-encoding.md): whether connect-es writes
 * `grpc-message` as the gRPC spec says (UTF-8, only bytes outside 0x20–0x7E and "%" itself as
 * %XX), on the strings of the record's tests: the three of test/adapters/transport/units.test.ts,
 * "grpc-message encoding", and a refusal naming a field with a colon, as the grpc-interop test
 * reads it. connect-es's answer is its own `setTrailerStatus` (protocol-grpc, what its gRPC
 * handler writes the trailer with), so an upgrade that changes it shows here. The threshold is
 * correctness: keep `minimalGrpcMessageEncoding` and `grpcPercentEncode` while connect-es's
 * encoding differs on any string. (The record's other way out, @grpc/grpc-js decoding with
 * decodeURIComponent, shows in the grpc-interop test.)
 *
 * For information, the cost of each per message: connect-es's `setTrailerStatus` into a new
 * `Headers`, `grpcPercentEncode`, and the wrapper on a refusal Connect answers over gRPC (the
 * response's two methods wrapped, the headers looked at, the trailer decoded and encoded again),
 * which the record did not measure. `npm run bench:micro -- grpc-message`.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

import { compare, formatNs } from "../../shared/micro-bench.js";
import type { NodeServerRequest, NodeServerResponse } from "../request/index.js";
import { grpcPercentEncode, minimalGrpcMessageEncoding } from "./grpc-message.js";

/** The record's test strings, each with its encoding as the gRPC spec writes it. */
const SPEC: ReadonlyArray<readonly [text: string, encoded: string]> = [
  ["amount: is required (DAI, USDT)", "amount: is required (DAI, USDT)"],
  ["100% sure\n", "100%25 sure%0A"],
  ["prix: 1,25 €", "prix: 1,25 %E2%82%AC"],
  [
    'amount: must be a plain decimal number, such as "10" or "0.5"',
    'amount: must be a plain decimal number, such as "10" or "0.5"',
  ],
];
const ERRORS = SPEC.map(([text]) => new ConnectError(text, Code.InvalidArgument));

/** connect-es's grpc-message for `error`, as its gRPC handler writes the trailer. */
const connectEncoding = (error: ConnectError) => setTrailerStatus(new Headers(), error).get("grpc-message") ?? "";

/** Where connect-es's encoding is not the spec's: each string, and what connect-es writes. */
const differing = SPEC.flatMap(([text, encoded], i) => {
  const theirs = connectEncoding(ERRORS[i]!);
  return theirs === encoded ? [] : [`${JSON.stringify(text)} as ${JSON.stringify(theirs)}`];
});
const wrong = SPEC.filter(([text, encoded]) => grpcPercentEncode(text) !== encoded);
if (wrong.length > 0)
  throw new Error(`grpcPercentEncode no longer writes the spec's encoding of ${JSON.stringify(wrong)}`);

/** A gRPC request, and a response whose methods do nothing: what the wrapper adds to an answer is all that runs. */
const GRPC_REQUEST = { headers: { "content-type": "application/grpc" } } as unknown as NodeServerRequest;
const response = () =>
  ({
    writeHead: (_status: number, _headers?: unknown) => undefined,
    addTrailers: (_trailers: unknown) => undefined,
  }) as unknown as NodeServerResponse;
const HEADERS = { "content-type": "application/grpc+proto" };
/** Connect's trailers for each string, as its handler hands them to Node. */
const TRAILERS = ERRORS.map((error) => ({ "grpc-status": "3", "grpc-message": connectEncoding(error) }));

let next = 0;
const turn = () => next++ % SPEC.length;

await compare({
  record: "0006",
  subject: "adapters/transport/rpc/grpc-message.ts",
  loop: 200,
  cases: {
    connectEs: { label: "connect-es setTrailerStatus", run: () => connectEncoding(ERRORS[turn()]!) },
    ours: { label: "grpcPercentEncode", run: () => grpcPercentEncode(SPEC[turn()]![0]) },
    wrapper: {
      label: "the wrapper on a refusal Connect answers",
      run: () => {
        const res = response();
        minimalGrpcMessageEncoding(GRPC_REQUEST, res);
        res.writeHead(200, HEADERS);
        res.addTrailers({ ...TRAILERS[turn()]! });
      },
    },
  },
  verdict: ({ connectEs, ours, wrapper }) => ({
    figure: `connect-es writes the spec's encoding of ${SPEC.length - differing.length} of ${SPEC.length} strings`,
    threshold: `remove at ${SPEC.length} of ${SPEC.length}`,
    remove: differing.length === 0,
    detail:
      `${differing.length === 0 ? "" : `e.g. connect-es writes ${differing[0]}; `}` +
      `a message: connect-es setTrailerStatus ${formatNs(connectEs)}, grpcPercentEncode ${formatNs(ours)}, ` +
      `the wrapper on a refusal ${formatNs(wrapper)}`,
  }),
});
