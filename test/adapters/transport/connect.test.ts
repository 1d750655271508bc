import { Code, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as http2 from "node:http2";

import { expect } from "chai";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  LOG_COUNT,
  PRICE,
  STRANGER,
  SWAP,
  USDC,
  WALLET,
  failure,
  startTestServer,
  type TestServer,
} from "./helpers.js";

const PROTOCOLS: Array<{ name: string; transport: (baseUrl: string) => Transport }> = [
  { name: "Connect over HTTP/1.1", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }) },
  { name: "Connect over HTTP/2 (h2c)", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2" }) },
  {
    name: "Connect over HTTP/1.1 with JSON",
    transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
  },
  { name: "gRPC-Web over HTTP/1.1", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }) },
];

function trade(overrides: Partial<Record<"userAddress" | "destinatary" | "amount" | "usdAddress", string>> = {}) {
  return { userAddress: WALLET, destinatary: CUSTOMER, amount: "2", usdAddress: DAI.address, ...overrides };
}

const withKey = { headers: { api_key: API_KEY } };

for (const protocol of PROTOCOLS) {
  describe(`${protocol.name} on the same port (Connect client)`, function () {
    let t: TestServer;
    let client: Client<typeof TokenService>;

    beforeEach(async function () {
      t = await startTestServer();
      client = createClient(TokenService, protocol.transport(t.url));
    });

    afterEach(async function () {
      await t.close();
    });

    for (const kind of ["sell", "buy", "remittance"] as const) {
      it(`${kind} returns the receipt with ${LOG_COUNT[kind]} events`, async function () {
        const receipt = await client[kind](trade({ usdAddress: USDC.address }), withKey);
        expect(receipt.status).to.equal(true);
        expect(receipt.to).to.equal(SWAP);
        expect(receipt.from).to.equal(WALLET.toLowerCase());
        expect(receipt.blockNumber).to.equal(101n);
        expect(receipt.contractAddress).to.equal(undefined);
        expect(receipt.events).to.have.length(LOG_COUNT[kind]);
        expect(receipt.events.map((e) => e.logIndex)).to.deep.equal([...Array(LOG_COUNT[kind]).keys()]);
        expect(receipt.events[1]!.raw?.data).to.equal(`0x${"1".padStart(64, "0")}`);
        expect(receipt.events[0]!.signature).to.equal(undefined);
        expect(t.trade.calls.map((c) => c.kind)).to.deep.equal([kind]);
      });
    }

    it("getPrice returns the rates for CHF, EUR and USD", async function () {
      const price = await client.getPrice({}, withKey);
      expect(price.cryptoCurrency).to.equal(PRICE.cryptoCurrency);
      expect(price.rateForCashCurrency).to.deep.equal(PRICE.rateForCashCurrency);
      expect(price.rateWithDiscountForCashCurrency).to.deep.equal({});
    });

    for (const method of ["sell", "buy", "remittance", "getPrice"] as const) {
      it(`${method} without a key fails with unauthenticated and trades nothing`, async function () {
        const error = await failure(method === "getPrice" ? client.getPrice({}) : client[method](trade()));
        expect(error.code).to.equal(Code.Unauthenticated);
        expect(error.rawMessage).to.include("api_key");
        expect(t.trade.calls).to.have.length(0);
      });

      it(`${method} with a wrong key fails with unauthenticated and trades nothing`, async function () {
        const options = { headers: { api_key: "wrong-key-0123456789abc" } };
        const error = await failure(
          method === "getPrice" ? client.getPrice({}, options) : client[method](trade(), options),
        );
        expect(error.code).to.equal(Code.Unauthenticated);
        expect(t.trade.calls).to.have.length(0);
      });
    }

    it("maps domain errors to the same codes as gRPC and the JSON routes", async function () {
      const cases: Array<[ReturnType<typeof trade>, Code, string]> = [
        [trade({ amount: "" }), Code.InvalidArgument, "amount: is required"],
        [trade({ amount: "abc" }), Code.InvalidArgument, "amount"],
        [trade({ usdAddress: CUSTOMER }), Code.InvalidArgument, "usdAddress"],
        [trade({ userAddress: STRANGER }), Code.PermissionDenied, "userAddress"],
        [trade({ amount: "600" }), Code.FailedPrecondition, "userAddress"],
        [trade({ amount: "13" }), Code.FailedPrecondition, "SwapPriceStale"],
      ];
      for (const [request, code, text] of cases) {
        const error = await failure(client.sell(request, withKey));
        expect(error.code, `${JSON.stringify(request)}: ${error.message}`).to.equal(code);
        expect(error.rawMessage).to.include(text);
      }
      expect(t.trade.nonce).to.equal(0);
    });
  });
}

describe("a request body that cannot be decoded, on every RPC protocol", function () {
  let t: TestServer;
  before(async function () {
    t = await startTestServer();
  });
  after(async function () {
    await t.close();
  });

  const garbage = Buffer.from([0xff, 0xff, 0xff, 0x01]); // field 524287, wire type 7: not protobuf
  const envelope = (flags: number, body: Buffer) => Buffer.concat([Buffer.from([flags, 0, 0, 0, body.length]), body]);

  async function grpc(frame: Buffer): Promise<{ status: string; message: string }> {
    const session = http2.connect(t.url);
    try {
      const stream = session.request({
        ":method": "POST",
        ":path": "/tokentrade.v1.TokenService/Sell",
        "content-type": "application/grpc",
        te: "trailers",
        api_key: API_KEY,
      });
      const fields: Record<string, string> = {};
      const take = (headers: http2.IncomingHttpHeaders) => {
        for (const name of ["grpc-status", "grpc-message"])
          if (typeof headers[name] === "string") fields[name] = headers[name] as string;
      };
      stream.on("response", take);
      stream.on("trailers", take);
      stream.resume();
      stream.end(frame);
      await new Promise((resolve) => stream.once("close", resolve));
      return { status: fields["grpc-status"] ?? "", message: decodeURIComponent(fields["grpc-message"] ?? "") };
    } finally {
      session.close();
    }
  }

  it("answers gRPC invalid_argument (3), not internal, for garbage protobuf and for a compressed message without grpc-encoding", async function () {
    expect(await grpc(envelope(0, garbage))).to.deep.equal({
      status: "3",
      message: "parse binary: illegal tag: field no 524287 wire type 7",
    });
    expect(await grpc(envelope(1, garbage))).to.deep.equal({
      status: "3",
      message: "received compressed envelope, but do not know how to decompress",
    });
    expect(t.trade.calls).to.have.length(0);
  });

  it("answers gRPC-Web and Connect invalid_argument too", async function () {
    const web = await fetch(`${t.url}/tokentrade.v1.TokenService/Sell`, {
      method: "POST",
      headers: { api_key: API_KEY, "content-type": "application/grpc-web+proto" },
      body: envelope(0, garbage),
    });
    const trailer = Buffer.from(await web.arrayBuffer());
    expect(trailer[0]).to.equal(0x80);
    expect(trailer.subarray(5).toString("latin1")).to.match(/grpc-status: ?3\r?\n/);
    const connect = await fetch(`${t.url}/tokentrade.v1.TokenService/Sell`, {
      method: "POST",
      headers: { api_key: API_KEY, "content-type": "application/proto" },
      body: garbage,
    });
    expect(connect.status).to.equal(400);
    expect(await connect.json()).to.deep.equal({
      code: "invalid_argument",
      message: "parse binary: illegal tag: field no 524287 wire type 7",
    });
  });

  it("refuses a JSON field the message does not have, on Connect as on the /api/v1 routes", async function () {
    const connect = await fetch(`${t.url}/tokentrade.v1.TokenService/Sell`, {
      method: "POST",
      headers: { api_key: API_KEY, "content-type": "application/json" },
      body: JSON.stringify({
        userAddress: WALLET,
        destinatary: CUSTOMER,
        amount: "1",
        usdAddress: DAI.address,
        note: "x",
      }),
    });
    expect(connect.status).to.equal(400);
    expect(((await connect.json()) as { code: string; message: string }).message).to.match(/key "note" is unknown/);
    expect(t.trade.calls).to.have.length(0);
  });
});
