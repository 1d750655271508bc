/**
 * The same gRPC calls from three clients nobody here wrote, against the lean gRPC path
 * (grpc-unary.ts) and against Connect's own: @grpc/grpc-js, Connect's gRPC transport, and
 * `buf curl --protocol grpc`. Deadlines, metadata, status codes with their messages,
 * compression both ways, the size limit, the api_key and idempotency behave the same on both.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import * as grpc from "@grpc/grpc-js";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { expect } from "chai";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { waitFor } from "../../helpers/wait.js";
import { MemoryJournal } from "../../helpers/memory-journal.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  PRICE,
  STRANGER,
  USDT,
  WALLET,
  failure,
  type GrpcOutcome,
  grpcClient,
  startTestServer,
  type TestServer,
} from "./helpers.js";

const BUF = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));
const PROTO_ROOT = fileURLToPath(new URL("../../../proto", import.meta.url));

async function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      BUF,
      ["curl", "--schema", PROTO_ROOT, "--protocol", "grpc", "--http2-prior-knowledge", ...args],
      { timeout: 60_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

/** grpc-js with metadata, a deadline and channel options; resolves with the answer or the error. */
function grpcJs<Method extends string>(
  url: string,
  method: Method,
  request: object,
  {
    apiKey = API_KEY,
    idempotencyKey,
    deadlineMs,
    channel,
  }: { apiKey?: string; idempotencyKey?: string; deadlineMs?: number; channel?: grpc.ChannelOptions } = {},
): Promise<GrpcOutcome<Method>> {
  const client = channel ? grpcClient(url, channel) : grpcClient(url);
  const metadata = new grpc.Metadata();
  metadata.set("api_key", apiKey);
  if (idempotencyKey !== undefined) metadata.set("idempotency-key", idempotencyKey);
  const options: grpc.CallOptions = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
  return new Promise((resolve) => {
    client[method]!(
      request,
      metadata,
      options,
      (error: grpc.ServiceError | null, response: NonNullable<GrpcOutcome<Method>["response"]>) => {
        client.close();
        resolve(error ? { error } : { response });
      },
    );
  });
}

const snakeTrade = (overrides: Record<string, string> = {}) => ({
  user_address: WALLET,
  destinatary: CUSTOMER,
  amount: "1.5",
  usd_address: USDT.address,
  ...overrides,
});
const camelTrade = (overrides: Record<string, string> = {}) => ({
  userAddress: WALLET,
  destinatary: CUSTOMER,
  amount: "1.5",
  usdAddress: USDT.address,
  ...overrides,
});

for (const grpcFastPath of [true, false]) {
  describe(`gRPC clients ${grpcFastPath ? "on the lean gRPC path" : "through Connect (grpcFastPath: false)"}`, function () {
    let t: TestServer;
    let connect: Client<typeof TokenService>;

    beforeEach(async function () {
      t = await startTestServer({ grpcFastPath, journal: new MemoryJournal() });
      connect = createClient(TokenService, createGrpcTransport({ baseUrl: t.url }));
    });

    afterEach(async function () {
      await t.close();
    });

    describe("@grpc/grpc-js", function () {
      it("sells within a deadline, and a retry with the same idempotency-key gets the same receipt without a second trade", async function () {
        const first = await grpcJs(t.url, "Sell", snakeTrade(), { deadlineMs: 10_000, idempotencyKey: "order-7" });
        expect(first.error?.message).to.equal(undefined);
        const again = await grpcJs(t.url, "Sell", snakeTrade(), { deadlineMs: 10_000, idempotencyKey: "order-7" });
        expect(again.response!.transaction_hash).to.equal(first.response!.transaction_hash);
        expect(t.trade.nonce).to.equal(1);
        const other = await grpcJs(t.url, "Sell", snakeTrade({ amount: "2" }), { idempotencyKey: "order-7" });
        expect(other.error?.code).to.equal(grpc.status.FAILED_PRECONDITION);
        expect(t.trade.nonce).to.equal(1);
      });

      it("sends gzip-compressed requests and reads the answers", async function () {
        const channel = { "grpc.default_compression_algorithm": 2, "grpc.default_compression_level": 2 };
        const { response, error } = await grpcJs(t.url, "Buy", snakeTrade({ usd_address: DAI.address }), { channel });
        expect(error?.message).to.equal(undefined);
        expect(response!.events).to.have.length(3);
        expect(t.trade.calls.map((c) => c.kind)).to.deep.equal(["buy"]);
      });

      it("reads a refusal's code and its message, colon and all, with the nonce unchanged", async function () {
        const { error } = await grpcJs(t.url, "Sell", snakeTrade({ destinatary: "0x12" }));
        expect(error?.code).to.equal(grpc.status.INVALID_ARGUMENT);
        expect(error?.details).to.match(/^destinatary: /);
        const wallet = await grpcJs(t.url, "Sell", snakeTrade({ user_address: STRANGER }));
        expect(wallet.error?.code).to.equal(grpc.status.PERMISSION_DENIED);
        const key = await grpcJs(t.url, "GetPrice", {}, { apiKey: "wrong-key-0123456789" });
        expect(key.error?.code).to.equal(grpc.status.UNAUTHENTICATED);
        expect(t.trade.nonce).to.equal(0);
      });

      it("gets DEADLINE_EXCEEDED when the trade outlasts the deadline, and the trade still reaches its outcome", async function () {
        t.trade.delayMs = 1_000;
        // The deadline leaves the new channel time to connect (on a loaded machine), and ends
        // long before the trade does.
        const { error } = await grpcJs(t.url, "Sell", snakeTrade(), { deadlineMs: 200, idempotencyKey: "late-1" });
        expect(error?.code).to.equal(grpc.status.DEADLINE_EXCEEDED);
        await waitFor("the trade to reach its outcome", async () => t.trade.nonce > 0, 5_000, 20).catch(() => {});
        expect(t.trade.nonce).to.equal(1);
        t.trade.delayMs = 0;
        const retry = await grpcJs(t.url, "Sell", snakeTrade(), { idempotencyKey: "late-1" });
        expect(retry.error?.message).to.equal(undefined);
        expect(retry.response!.status).to.equal(true);
        expect(t.trade.nonce).to.equal(1);
      });

      it("refuses a message over the size limit with RESOURCE_EXHAUSTED and trades nothing", async function () {
        const { error } = await grpcJs(t.url, "Sell", snakeTrade({ amount: "1".repeat(20_000) }));
        expect(error?.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
        expect(t.trade.calls).to.have.length(0);
      });
    });

    describe("Connect's gRPC transport", function () {
      it("gets the price and sells, with the api_key and a timeout", async function () {
        const price = await connect.getPrice({}, { headers: { api_key: API_KEY }, timeoutMs: 5_000 });
        expect(price.rateForCashCurrency).to.deep.equal(PRICE.rateForCashCurrency);
        const receipt = await connect.sell(camelTrade(), { headers: { api_key: API_KEY }, timeoutMs: 5_000 });
        expect(receipt.status).to.equal(true);
        expect(receipt.events).to.have.length(5);
      });

      it("sends a gzip-compressed request and accepts the answer", async function () {
        const gzipped = createClient(
          TokenService,
          createGrpcTransport({
            baseUrl: t.url,
            sendCompression: (await import("@connectrpc/connect-node")).compressionGzip,
            compressMinBytes: 1,
          }),
        );
        const receipt = await gzipped.remittance(camelTrade({ amount: "2" }), { headers: { api_key: API_KEY } });
        expect(receipt.events).to.have.length(3);
      });

      it("reads refusals with their codes: invalid_argument naming the field, unauthenticated, failed_precondition", async function () {
        const invalid = await failure(connect.buy(camelTrade({ amount: "1e3" }), { headers: { api_key: API_KEY } }));
        expect(invalid.code).to.equal(Code.InvalidArgument);
        expect(invalid.rawMessage).to.match(/^amount: /);
        const unauthenticated = await failure(connect.buy(camelTrade(), {}));
        expect(unauthenticated.code).to.equal(Code.Unauthenticated);
        const reverted = await failure(connect.buy(camelTrade({ amount: "13" }), { headers: { api_key: API_KEY } }));
        expect(reverted.code).to.equal(Code.FailedPrecondition);
        expect(t.trade.nonce).to.equal(0);
      });
    });

    describe("buf curl --protocol grpc", function () {
      it("sells and gets the price with the api_key, and is refused without it", async function () {
        const url = `${t.url}/${TokenService.typeName}`;
        const price = await bufCurl(["-H", `api_key: ${API_KEY}`, "-d", "{}", `${url}/GetPrice`]);
        expect(price.code, price.stderr).to.equal(0);
        expect(JSON.parse(price.stdout).rateForCashCurrency).to.deep.equal(PRICE.rateForCashCurrency);
        const sell = await bufCurl([
          "-H",
          `api_key: ${API_KEY}`,
          "-H",
          "idempotency-key: buf-1",
          "-d",
          JSON.stringify(camelTrade()),
          `${url}/Sell`,
        ]);
        expect(sell.code, sell.stderr).to.equal(0);
        expect(JSON.parse(sell.stdout).events).to.have.length(5);
        const refused = await bufCurl(["-d", "{}", `${url}/GetPrice`]);
        expect(refused.code).to.not.equal(0);
        expect(refused.stderr).to.include("unauthenticated");
        const invalid = await bufCurl([
          "-H",
          `api_key: ${API_KEY}`,
          "-d",
          JSON.stringify(camelTrade({ usdAddress: CUSTOMER })),
          `${url}/Sell`,
        ]);
        expect(invalid.stderr).to.include("invalid_argument");
        expect(invalid.stderr).to.include("usdAddress");
        expect(t.trade.nonce).to.equal(1);
      });
    });
  });
}
