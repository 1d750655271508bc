/**
 * The lean gRPC path (adapters/transport/rpc/grpc-unary.ts) against Connect's own: the same calls,
 * sent as raw HTTP/2 to a server with the path and to one without, must be answered the same on
 * the wire: status, headers, whether the answer is trailers-only, the data bytes, the trailers.
 */
import * as http2 from "node:http2";
import { gzipSync } from "node:zlib";

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { expect } from "chai";
import { pino } from "pino";

import { createUseCases } from "../../../core/index.js";
import {
  GetPriceRequestSchema,
  GetTradeRequestSchema,
  TradeRequestSchema,
  TradeSchema,
} from "../../../gen/tokentrade/v1/token_pb.js";
import { bindRequestContext } from "../../../adapters/transport/request/index.js";
import { grpcUnary, tokenCalls } from "../../../adapters/transport/rpc/index.js";
import { MemoryJournal } from "../../helpers/memory-journal.js";
import {
  API_KEY,
  CONFIG,
  CUSTOMER,
  ChainUnavailableError,
  DAI,
  FakePricePort,
  FakeTradePort,
  PriceUnavailableError,
  STRANGER,
  USDT,
  WALLET,
  startTestServer,
  type TestServer,
} from "./helpers.js";

const SERVICE = "/tokentrade.v1.TokenService";

/** A gRPC envelope: flags, 32-bit length, the message. */
function frame(message: Uint8Array, flags = 0): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out[0] = flags;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

function trade(
  fields: Partial<Record<"userAddress" | "destinatary" | "amount" | "usdAddress", string>> = {},
): Uint8Array {
  return toBinary(
    TradeRequestSchema,
    create(TradeRequestSchema, {
      userAddress: WALLET,
      destinatary: CUSTOMER,
      amount: "1.5",
      usdAddress: USDT.address,
      ...fields,
    }),
  );
}

const PRICE_REQUEST = toBinary(GetPriceRequestSchema, create(GetPriceRequestSchema, {}));

interface Call {
  name: string;
  path: string;
  /** Each is sent as its own DATA frame. */
  body: Buffer[];
  headers?: Record<string, string | string[]>;
  /** What of the answer's data is compared (default: all of it). */
  data?(bytes: Buffer): Uint8Array;
  /** Runs on the server before the call (a failing port, say). */
  setup?(t: TestServer): void;
}

/** What a client sees of an answer: HTTP/2 semantics, not frame boundaries. */
interface Wire {
  status: number;
  /** Header and trailer names in the order they came. */
  order: string[];
  headers: Record<string, unknown>;
  trailersOnly: boolean;
  data: string;
  trailers: Record<string, unknown>;
}

const VARYING = new Set(["date", "x-request-id"]);

function normalised(headers: http2.IncomingHttpHeaders): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers).sort(([a], [b]) => a.localeCompare(b)))
    if (!VARYING.has(name) && name !== ":status") out[name] = value;
  return out;
}

async function send(session: http2.ClientHttp2Session, call: Call): Promise<Wire> {
  const stream = session.request({
    ":method": "POST",
    ":path": call.path,
    "content-type": "application/grpc",
    te: "trailers",
    api_key: API_KEY,
    ...call.headers,
  });
  for (const chunk of call.body) stream.write(chunk);
  stream.end();
  return new Promise((resolve, reject) => {
    const wire: Wire = { status: 0, order: [], headers: {}, trailersOnly: false, data: "", trailers: {} };
    const names = (raw: string[]) => raw.filter((_, i) => i % 2 === 0).filter((name) => !VARYING.has(name));
    const data: Buffer[] = [];
    stream.on("response", (headers, flags, raw: string[]) => {
      wire.order.push(...names(raw));
      wire.status = Number(headers[":status"]);
      wire.headers = normalised(headers);
      wire.trailersOnly = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
    });
    stream.on("trailers", (trailers, _flags, raw: string[]) => {
      wire.order.push("--", ...names(raw));
      wire.trailers = normalised(trailers);
    });
    stream.on("data", (chunk: Buffer) => data.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      try {
        const bytes = Buffer.concat(data);
        resolve({
          ...wire,
          data: Buffer.from(call.data && bytes.length > 0 ? call.data(bytes) : bytes).toString("hex"),
        });
      } catch (error) {
        reject(error);
      }
    });
  });
}

const CALLS: Call[] = [
  { name: "GetPrice", path: `${SERVICE}/GetPrice`, body: [frame(PRICE_REQUEST)] },
  { name: "GetPrice again (the cached answer)", path: `${SERVICE}/GetPrice`, body: [frame(PRICE_REQUEST)] },
  { name: "Sell", path: `${SERVICE}/Sell`, body: [frame(trade({ amount: "3", usdAddress: DAI.address }))] },
  { name: "Buy", path: `${SERVICE}/Buy`, body: [frame(trade())] },
  { name: "Remittance", path: `${SERVICE}/Remittance`, body: [frame(trade({ amount: "2" }))] },
  {
    name: "Sell, content type application/grpc+proto",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    headers: { "content-type": "application/grpc+proto" },
  },
  {
    name: "Sell, the message in several DATA frames",
    path: `${SERVICE}/Sell`,
    body: [...frame(trade())].map((byte) => Buffer.from([byte])),
  },
  {
    name: "Sell with an unknown field (skipped)",
    path: `${SERVICE}/Sell`,
    body: [frame(Buffer.concat([trade(), Buffer.from([0xfa, 0x06, 0x01, 0x78])]))],
  },
  { name: "Sell without amount", path: `${SERVICE}/Sell`, body: [frame(trade({ amount: "" }))] },
  { name: "Sell to a bad address", path: `${SERVICE}/Sell`, body: [frame(trade({ destinatary: "0x12" }))] },
  { name: "Sell with a bad amount", path: `${SERVICE}/Sell`, body: [frame(trade({ amount: "1e3" }))] },
  { name: "Buy from an unknown wallet", path: `${SERVICE}/Buy`, body: [frame(trade({ userAddress: STRANGER }))] },
  { name: "Buy beyond the funds", path: `${SERVICE}/Buy`, body: [frame(trade({ amount: "600" }))] },
  { name: "Buy that would revert", path: `${SERVICE}/Buy`, body: [frame(trade({ amount: "13" }))] },
  {
    name: "Sell, an amount with percent, colon and non-ASCII",
    path: `${SERVICE}/Sell`,
    body: [frame(trade({ amount: "10%: é" }))],
  },
  {
    name: "Sell on an unreachable chain",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    setup: (t) => (t.trade.failure = new ChainUnavailableError("connection refused")),
  },
  {
    name: "Sell hitting a bug",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    setup: (t) => (t.trade.failure = new RangeError("secret internals")),
  },
  {
    name: "Sell whose receipt does not fit the message (a gas price over uint64)",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    setup: (t) => {
      t.trade.failure = undefined;
      t.trade.receiptOverride = { effectiveGasPrice: 2 ** 70 };
    },
  },
  {
    name: "GetPrice, the feed stale",
    path: `${SERVICE}/GetPrice`,
    body: [frame(PRICE_REQUEST)],
    setup: (t) => {
      t.trade.receiptOverride = undefined;
      t.price.failure = new PriceUnavailableError("stale");
    },
  },
  {
    name: "GetTrade of an unknown hash",
    path: `${SERVICE}/GetTrade`,
    body: [
      frame(
        toBinary(GetTradeRequestSchema, create(GetTradeRequestSchema, { transactionHash: `0x${"ab".repeat(32)}` })),
      ),
    ],
    setup: (t) => (t.price.failure = undefined),
  },
  {
    name: "Sell with an Idempotency-Key",
    path: `${SERVICE}/Sell`,
    body: [frame(trade({ amount: "4" }))],
    headers: { "idempotency-key": "order-1" },
  },
  {
    name: "the same Sell again: the first outcome",
    path: `${SERVICE}/Sell`,
    body: [frame(trade({ amount: "4" }))],
    headers: { "idempotency-key": "order-1" },
  },
  {
    name: "the key with another request",
    path: `${SERVICE}/Sell`,
    body: [frame(trade({ amount: "5" }))],
    headers: { "idempotency-key": "order-1" },
  },
  {
    name: "an Idempotency-Key that is not valid",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    headers: { "idempotency-key": "x".repeat(300) },
  },
  {
    name: "GetTrade of the keyed sell",
    path: `${SERVICE}/GetTrade`,
    body: [
      frame(
        toBinary(
          GetTradeRequestSchema,
          create(GetTradeRequestSchema, { transactionHash: `0x${"5".padStart(64, "b")}` }),
        ),
      ),
    ],
    // The journal's id and times (the trade's, and its transactions' sending) differ from one server to the other.
    data: (bytes) => {
      const trade = fromBinary(TradeSchema, bytes.subarray(5));
      expect(trade.status).to.equal("confirmed");
      const transactions = trade.transactions.map((tx) => ({ ...tx, sentAt: "" }));
      return toBinary(TradeSchema, { ...trade, id: "", createdAt: "", updatedAt: "", transactions });
    },
  },
  // What the client accepts for the answer.
  ...["gzip", "identity,deflate,gzip", "br, gzip", "identity", "snappy", ""].map((accepted) => ({
    name: `GetPrice, grpc-accept-encoding "${accepted}"`,
    path: `${SERVICE}/GetPrice`,
    body: [frame(PRICE_REQUEST)],
    headers: { "grpc-accept-encoding": accepted },
  })),
  // Deadlines: a valid one changes nothing, an invalid one is refused.
  ...["10S", "1m", "100n", "5H", "abc", "123456789S", "10s"].map((timeout) => ({
    name: `Buy, grpc-timeout "${timeout}"`,
    path: `${SERVICE}/Buy`,
    body: [frame(trade({ amount: "1" }))],
    headers: { "grpc-timeout": timeout },
  })),
  // Compression of the request.
  {
    name: "Sell compressed with gzip",
    path: `${SERVICE}/Sell`,
    body: [frame(gzipSync(trade()), 1)],
    headers: { "grpc-encoding": "gzip" },
  },
  {
    name: "Sell uncompressed, grpc-encoding gzip",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    headers: { "grpc-encoding": "gzip" },
  },
  {
    name: "Sell, grpc-encoding identity",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    headers: { "grpc-encoding": "identity" },
  },
  {
    name: "Sell, an unknown grpc-encoding",
    path: `${SERVICE}/Sell`,
    body: [frame(trade())],
    headers: { "grpc-encoding": "snappy" },
  },
  {
    name: "Sell, the compressed flag without grpc-encoding",
    path: `${SERVICE}/Sell`,
    body: [frame(gzipSync(trade()), 1)],
  },
  // Bodies that are not one plain message.
  {
    name: "Sell, bytes that do not decode",
    path: `${SERVICE}/Sell`,
    body: [frame(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]))],
  },
  { name: "Sell, no body", path: `${SERVICE}/Sell`, body: [] },
  { name: "Sell, two messages", path: `${SERVICE}/Sell`, body: [frame(trade()), frame(trade())] },
  { name: "Sell, a truncated envelope", path: `${SERVICE}/Sell`, body: [frame(trade()).subarray(0, 20)] },
  { name: "Sell, three bytes", path: `${SERVICE}/Sell`, body: [Buffer.from([0, 0, 0])] },
  {
    name: "Sell, a message over the size limit",
    path: `${SERVICE}/Sell`,
    body: [frame(trade({ amount: "1".repeat(20_000) }))],
  },
  {
    name: "Sell, an envelope declaring more than the limit",
    path: `${SERVICE}/Sell`,
    body: [Buffer.from([0, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3])],
  },
  // Other codecs and protocols, and names the service does not have.
  {
    name: "Sell as gRPC with JSON",
    path: `${SERVICE}/Sell`,
    body: [
      frame(
        Buffer.from(
          JSON.stringify({ userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: USDT.address }),
        ),
      ),
    ],
    headers: { "content-type": "application/grpc+json" },
  },
  { name: "an unknown method", path: `${SERVICE}/Transfer`, body: [frame(trade())] },
  { name: "a path with a query", path: `${SERVICE}/GetPrice?x=1`, body: [frame(PRICE_REQUEST)] },
  { name: "a path with dot segments", path: `/x/..${SERVICE}/GetPrice`, body: [frame(PRICE_REQUEST)] },
  { name: "a path with a dot segment before the method", path: `${SERVICE}/./GetPrice`, body: [frame(PRICE_REQUEST)] },
  {
    name: "GetPrice without a key",
    path: `${SERVICE}/GetPrice`,
    body: [frame(PRICE_REQUEST)],
    headers: { api_key: "" },
  },
  {
    name: "GetPrice with two api_key values",
    path: `${SERVICE}/GetPrice`,
    body: [frame(PRICE_REQUEST)],
    headers: { api_key: [API_KEY, API_KEY] },
  },
];

describe("the lean gRPC path answers as Connect does", function () {
  async function run(grpcFastPath: boolean): Promise<Array<{ name: string; wire: Wire }>> {
    const t = await startTestServer({ grpcFastPath, journal: new MemoryJournal() });
    const session = http2.connect(t.url);
    try {
      const out: Array<{ name: string; wire: Wire }> = [];
      for (const call of CALLS) {
        call.setup?.(t);
        out.push({ name: call.name, wire: await send(session, call) });
      }
      return out;
    } finally {
      session.close();
      await t.close();
    }
  }

  let lean: Array<{ name: string; wire: Wire }>;
  let connect: Array<{ name: string; wire: Wire }>;
  before(async function () {
    lean = await run(true);
    connect = await run(false);
  });

  CALLS.forEach((call, i) => {
    it(`${call.name}: the same status, headers, data and trailers`, function () {
      expect(lean[i]!.wire).to.deep.equal(connect[i]!.wire);
    });
  });

  it("the calls cover success, every refusal kind, and Connect's own errors", function () {
    const codes = new Set(
      connect.map(({ wire }) => String(wire.trailers["grpc-status"] ?? wire.headers["grpc-status"])),
    );
    // ok, invalid_argument, not_found, failed_precondition, permission_denied, resource_exhausted,
    // unimplemented, internal, unavailable, unauthenticated.
    for (const code of ["0", "3", "5", "9", "7", "8", "12", "13", "14", "16"])
      expect(codes, `grpc-status ${code}`).to.include(code);
    const success = connect.find(({ name }) => name === "Sell")!.wire;
    expect(success.headers).to.deep.equal({ "content-type": "application/grpc+proto" });
    expect(success.trailers).to.deep.equal({ "grpc-status": "0" });
    expect(success.data.length).to.be.greaterThan(1000);
    // grpc-message in the gRPC spec's minimal percent-encoding, which grpc-js decodes: ":" stays as it is.
    const refused = connect.find(({ name }) => name.startsWith("Sell, an amount with percent"))!.wire;
    expect(refused.trailers["grpc-message"]).to.match(/^amount: must be /);
    // An answer that does not encode is a bug: "internal error", never the encoder's own words.
    const unencodable = connect.find(({ name }) => name.startsWith("Sell whose receipt does not fit"))!.wire;
    expect(unencodable.trailers).to.deep.equal({ "grpc-message": "internal error", "grpc-status": "13" });
  });
});

describe("a request body the server stopped waiting for", function () {
  for (const grpcFastPath of [true, false]) {
    it(`runs no trade once the stream is reset for its late body (${grpcFastPath ? "lean path" : "Connect"})`, async function () {
      const t = await startTestServer({ grpcFastPath, limits: { bodyMs: 300 } });
      const session = http2.connect(t.url);
      session.on("error", () => {});
      try {
        const stream = session.request({
          ":method": "POST",
          ":path": `${SERVICE}/Sell`,
          "content-type": "application/grpc",
          te: "trailers",
          api_key: API_KEY,
        });
        stream.on("error", () => {});
        stream.resume();
        stream.write(frame(trade())); // the whole message, but the stream is never ended
        await new Promise((resolve) => stream.once("close", resolve));
        expect(stream.rstCode).to.equal(http2.constants.NGHTTP2_CANCEL);
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(t.trade.calls).to.have.length(0);
      } finally {
        session.destroy();
        await t.close();
      }
    });
  }
});

describe("which calls the lean gRPC path takes", function () {
  /** A server whose every request goes to the lean handler; "not taken" when it declines. */
  async function harness() {
    const handedOver: Array<{ path: string; body: Buffer }> = [];
    const log = pino({ level: "silent" });
    const lean = grpcUnary({
      calls: tokenCalls(createUseCases({ trade: new FakeTradePort(), price: new FakePricePort(), config: CONFIG })),
      readMaxBytes: 16 * 1024,
      connect: async (req, res, _context, body) => {
        const chunks: Buffer[] = [];
        for await (const chunk of body) chunks.push(Buffer.from(chunk));
        handedOver.push({ path: req.url ?? "", body: Buffer.concat(chunks) });
        res.writeHead(200, { "content-type": "application/grpc", "x-taken-by": "connect" });
        res.end();
      },
    });
    const server = http2.createServer((req, res) => {
      const context = bindRequestContext(req, log);
      context.key = { ok: true, keyIndex: 0, scope: "scope" };
      if (!lean(req, res, context)) {
        res.writeHead(200, { "x-taken-by": "nobody" });
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const session = http2.connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    const close = async () => {
      session.close();
      await new Promise((resolve) => server.close(resolve));
    };
    return { session, handedOver, close };
  }

  const takenBy = async (session: http2.ClientHttp2Session, call: Call): Promise<string> => {
    const wire = await send(session, call);
    return String(
      wire.headers["x-taken-by"] ??
        (wire.trailers["grpc-status"] === "0" ? "lean" : `lean, grpc-status ${String(wire.trailers["grpc-status"])}`),
    );
  };

  it("answers plain binary calls itself", async function () {
    const h = await harness();
    try {
      expect(
        await takenBy(h.session, { name: "", path: `${SERVICE}/GetPrice`, body: [frame(PRICE_REQUEST)] }),
      ).to.equal("lean");
      expect(
        await takenBy(h.session, {
          name: "",
          path: `${SERVICE}/Sell`,
          body: [frame(trade())],
          headers: { "grpc-timeout": "5S" },
        }),
      ).to.equal("lean");
      expect(
        await takenBy(h.session, { name: "", path: `${SERVICE}/Buy`, body: [frame(trade({ amount: "1e3" }))] }),
      ).to.equal("lean, grpc-status 3");
      expect(h.handedOver).to.deep.equal([]);
    } finally {
      await h.close();
    }
  });

  it("leaves other protocols, codecs, compression and bad deadlines to Connect from the first byte", async function () {
    const h = await harness();
    try {
      for (const headers of <Array<Record<string, string>>>[
        { "content-type": "application/grpc+json" },
        { "content-type": "application/grpc-web+proto" },
        { "grpc-encoding": "gzip" },
        { "grpc-timeout": "soon" },
      ]) {
        expect(
          await takenBy(h.session, { name: "", path: `${SERVICE}/Sell`, body: [frame(trade())], headers }),
          JSON.stringify(headers),
        ).to.equal("nobody");
      }
      expect(await takenBy(h.session, { name: "", path: `${SERVICE}/Transfer`, body: [frame(trade())] })).to.equal(
        "nobody",
      );
      expect(h.handedOver).to.deep.equal([]);
    } finally {
      await h.close();
    }
  });

  it("hands Connect every byte of a body it will not answer, in order", async function () {
    const h = await harness();
    try {
      const oversize = frame(trade({ amount: "1".repeat(20_000) }));
      const bodies = [
        frame(gzipSync(trade()), 1),
        Buffer.concat([frame(trade()), frame(trade())]),
        frame(trade()).subarray(0, 9),
        Buffer.from([0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff]),
        oversize,
      ];
      for (const body of bodies) {
        const chunks =
          body === oversize ? [body.subarray(0, 7000), body.subarray(7000, 17000), body.subarray(17000)] : [body];
        expect(await takenBy(h.session, { name: "", path: `${SERVICE}/Sell`, body: chunks })).to.equal("connect");
      }
      expect(h.handedOver.map((h) => h.body.toString("hex"))).to.deep.equal(bodies.map((b) => b.toString("hex")));
    } finally {
      await h.close();
    }
  });
});
