import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { expect } from "chai";

import { TokenService } from "../../../gen/token/v1/token_pb.js";
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
  startTestServer,
  type TestServer,
} from "./helpers.js";

const PROTOCOLS: Array<{ name: string; transport: (baseUrl: string) => Transport }> = [
  { name: "Connect over HTTP/1.1", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }) },
  { name: "Connect over HTTP/2 (h2c)", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2" }) },
  { name: "Connect over HTTP/1.1 with JSON", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }) },
  { name: "gRPC-Web over HTTP/1.1", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }) },
];

function trade(overrides: Partial<Record<"userAddress" | "destinatary" | "amount" | "usdAddress", string>> = {}) {
  return { userAddress: WALLET, destinatary: CUSTOMER, amount: "2", usdAddress: DAI.address, ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the call to fail");
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
        const error = await failure(method === "getPrice" ? client.getPrice({}, options) : client[method](trade(), options));
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
