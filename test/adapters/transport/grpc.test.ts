import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";

import {
  API_KEY,
  CUSTOMER,
  ChainUnavailableError,
  DAI,
  LOG_COUNT,
  PRICE,
  PriceUnavailableError,
  STRANGER,
  SWAP,
  USDT,
  WALLET,
  grpcCall,
  grpcClient,
  startTestServer,
  type TestServer,
} from "./helpers.js";

/** A valid gRPC trade request (snake_case, as the .proto names the fields). */
function grpcTrade(overrides: Record<string, string> = {}) {
  return { user_address: WALLET, destinatary: CUSTOMER, amount: "1.5", usd_address: USDT.address, ...overrides };
}

const TRADES = [
  { method: "Sell", kind: "sell" },
  { method: "Buy", kind: "buy" },
  { method: "Remittance", kind: "remittance" },
] as const;

for (const grpcFastPath of [true, false])
  describe(`gRPC over h2c on the same port (@grpc/grpc-js, ${grpcFastPath ? "the lean gRPC path" : "through Connect"})`, function () {
    let t: TestServer;
    let client: ReturnType<typeof grpcClient>;

    beforeEach(async function () {
      t = await startTestServer({ grpcFastPath });
      client = grpcClient(t.url);
    });

    afterEach(async function () {
      client.close();
      await t.close();
    });

    for (const { method, kind } of TRADES) {
      it(`${method} returns the receipt in snake_case with ${LOG_COUNT[kind]} events in log order`, async function () {
        const { response, error } = await grpcCall(
          client,
          method,
          grpcTrade({ usd_address: DAI.address, amount: "3" }),
          API_KEY,
        );
        expect(error, error?.message).to.equal(undefined);
        expect(response!.status).to.equal(true);
        expect(response!.to).to.equal(SWAP);
        expect(response!.from).to.equal(WALLET.toLowerCase());
        expect(response!.block_number).to.equal("101");
        expect(response!.type).to.equal("0x2");
        expect(response!.contract_address).to.equal(undefined);
        expect(response!.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
        const events = response!.events;
        expect(events).to.have.length(LOG_COUNT[kind]);
        expect(events.map((e) => e.log_index)).to.deep.equal([...Array(LOG_COUNT[kind]).keys()]);
        expect(events[0]!.id).to.match(/^log_[0-9a-f]{8}$/);
        expect(events[0]!.raw.topics).to.have.length(2);
        expect(events[0]!.return_values).to.deep.equal({});
        expect(t.trade.calls.map((c) => c.kind)).to.deep.equal([kind]);
        expect(t.trade.calls[0]!.order.amount).to.equal(kind === "sell" ? 3n * 10n ** 18n : 3n * 10n ** 18n);
      });
    }

    it("GetPrice returns the rates for CHF, EUR and USD", async function () {
      const { response, error } = await grpcCall(client, "GetPrice", {}, API_KEY);
      expect(error, error?.message).to.equal(undefined);
      expect(response!.crypto_currency).to.equal(PRICE.cryptoCurrency);
      expect(response!.rate_for_cash_currency).to.deep.equal(PRICE.rateForCashCurrency);
      expect(response!.rate_with_discount_for_cash_currency).to.deep.equal({});
    });

    describe("when the api_key metadata is missing or wrong", function () {
      for (const method of ["Sell", "Buy", "Remittance", "GetPrice"]) {
        for (const [label, key] of [
          ["missing", undefined],
          ["wrong", "not-the-key-0123456789"],
        ] as const) {
          it(`${method} with the key ${label} fails with UNAUTHENTICATED and trades nothing`, async function () {
            const { error } = await grpcCall(client, method, method === "GetPrice" ? {} : grpcTrade(), key);
            expect(error?.code).to.equal(grpc.status.UNAUTHENTICATED);
            expect(error?.details).to.include("api_key");
            expect(t.trade.nonce).to.equal(0);
            expect(t.trade.calls).to.have.length(0);
          });
        }
      }
    });

    describe("when the trade is refused, the code matches the JSON routes' and nothing is sent", function () {
      const cases = [
        {
          name: "an unset field",
          request: { user_address: WALLET, destinatary: CUSTOMER, usd_address: USDT.address },
          code: grpc.status.INVALID_ARGUMENT,
          text: "amount: is required",
        },
        {
          name: "a bad address",
          request: grpcTrade({ destinatary: "0x12" }),
          code: grpc.status.INVALID_ARGUMENT,
          text: "destinatary",
        },
        {
          name: "a bad amount",
          request: grpcTrade({ amount: "1e3" }),
          code: grpc.status.INVALID_ARGUMENT,
          text: "amount",
        },
        {
          name: "an unsupported stable coin",
          request: grpcTrade({ usd_address: CUSTOMER }),
          code: grpc.status.INVALID_ARGUMENT,
          text: "usdAddress",
        },
        {
          name: "an unknown wallet",
          request: grpcTrade({ user_address: STRANGER }),
          code: grpc.status.PERMISSION_DENIED,
          text: "userAddress",
        },
        {
          name: "insufficient funds",
          request: grpcTrade({ amount: "600" }),
          code: grpc.status.FAILED_PRECONDITION,
          text: "userAddress",
        },
        {
          name: "a trade that would revert",
          request: grpcTrade({ amount: "13" }),
          code: grpc.status.FAILED_PRECONDITION,
          text: "SwapPriceStale",
        },
      ];
      for (const c of cases) {
        it(`${c.name}: ${grpc.status[c.code]}`, async function () {
          const { error } = await grpcCall(client, "Buy", c.request, API_KEY);
          expect(error?.code, error?.message).to.equal(c.code);
          expect(error?.details).to.include(c.text);
          expect(t.trade.nonce).to.equal(0);
        });
      }

      it("an unreachable chain: UNAVAILABLE", async function () {
        t.trade.failure = new ChainUnavailableError("connection refused");
        const { error } = await grpcCall(client, "Sell", grpcTrade(), API_KEY);
        expect(error?.code).to.equal(grpc.status.UNAVAILABLE);
      });

      it("a stale price: UNAVAILABLE", async function () {
        t.price.failure = new PriceUnavailableError("stale");
        const { error } = await grpcCall(client, "GetPrice", {}, API_KEY);
        expect(error?.code).to.equal(grpc.status.UNAVAILABLE);
        expect(error?.details).to.include("stale");
      });

      it("a bug: INTERNAL with a generic message", async function () {
        t.trade.failure = new RangeError("secret internals");
        const { error } = await grpcCall(client, "Sell", grpcTrade(), API_KEY);
        expect(error?.code).to.equal(grpc.status.INTERNAL);
        expect(error?.details).to.equal("internal error");
      });
    });

    it("a message over the size limit fails with RESOURCE_EXHAUSTED", async function () {
      const { error } = await grpcCall(client, "Sell", grpcTrade({ amount: "1".repeat(20_000) }), API_KEY);
      expect(error?.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
      expect(t.trade.calls).to.have.length(0);
    });

    it("serves many concurrent calls on one HTTP/2 connection", async function () {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          grpcCall(client, i % 2 ? "Buy" : "Sell", grpcTrade({ amount: String(i + 100) }), API_KEY),
        ),
      );
      expect(results.filter((r) => r.error)).to.have.length(0);
      expect(new Set(results.map((r) => r.response!.transaction_hash)).size).to.equal(20);
    });
  });
