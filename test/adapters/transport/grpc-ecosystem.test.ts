/**
 * What gRPC tools expect of a server, tried with clients nobody here wrote: `buf curl` lists and
 * calls the services through server reflection (v1 and v1alpha) without the proto files, and
 * calls grpc.health.v1; @grpc/grpc-js watches health across a readiness change and the
 * shutdown, and gets UNIMPLEMENTED for services and methods the server does not have.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  CUSTOMER,
  type GrpcServiceClient,
  PROTO_ROOT,
  USDT,
  WALLET,
  startTestServer,
  type TestServer,
} from "./helpers.js";

const BUF = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));
const TOKEN_SERVICE = TokenService.typeName;

/** Runs `buf curl` (HTTP/2 without TLS) with `args`; its exit code, stdout and stderr. */
async function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(BUF, ["curl", "--http2-prior-knowledge", ...args], {
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

/** A grpc-js client for grpc.health.v1.Health, from its .proto file. */
function healthClient(url: string): GrpcServiceClient {
  const definition = protoLoader.loadSync("grpc/health/v1/health.proto", {
    includeDirs: [PROTO_ROOT],
    enums: String,
    defaults: true,
  });
  const proto = grpc.loadPackageDefinition(definition) as unknown as {
    grpc: {
      health: {
        v1: {
          Health: new (address: string, credentials: grpc.ChannelCredentials) => GrpcServiceClient;
        };
      };
    };
  };
  return new proto.grpc.health.v1.Health(new URL(url).host, grpc.credentials.createInsecure());
}

/** A unary call to any path, with grpc-js; resolves with its status code and message. */
function rawUnary(url: string, path: string, apiKey?: string): Promise<{ code: number; details: string }> {
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (apiKey) metadata.set("api_key", apiKey);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (value: Buffer) => value,
      (value: Buffer) => value,
      Buffer.alloc(0),
      metadata,
      (error) => {
        client.close();
        resolve({ code: error?.code ?? grpc.status.OK, details: error?.details ?? "" });
      },
    );
  });
}

describe("gRPC ecosystem: reflection, health, unimplemented", function () {
  this.timeout(120_000);
  let t: TestServer;

  beforeEach(async function () {
    t = await startTestServer({ journal: new MemoryJournal() });
  });
  afterEach(async function () {
    await t.close();
  });

  describe("server reflection", function () {
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      it(`lets buf curl list the services and describe their methods without proto files (${protocol})`, async function () {
        const services = await bufCurl(["--reflect-protocol", protocol, "--list-services", t.url]);
        expect(services.code, services.stderr).to.equal(0);
        expect(services.stdout.trim().split("\n").sort()).to.deep.equal(
          [
            TOKEN_SERVICE,
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
          ].sort(),
        );
        const methods = await bufCurl(["--reflect-protocol", protocol, "--list-methods", t.url]);
        expect(methods.code, methods.stderr).to.equal(0);
        for (const method of [
          "Sell",
          "Buy",
          "Remittance",
          "GetPrice",
          "GetTrade",
          "ListTrades",
          "GetTradeSummary",
          "Quote",
        ])
          expect(methods.stdout).to.include(`${TOKEN_SERVICE}/${method}`);
      });
    }

    it("lets buf curl call GetPrice by its schema from reflection; the call itself still needs the api_key", async function () {
      const call = await bufCurl([
        "--protocol",
        "grpc",
        "-H",
        `api_key: ${API_KEY}`,
        `${t.url}/${TOKEN_SERVICE}/GetPrice`,
      ]);
      expect(call.code, call.stderr).to.equal(0);
      const price = JSON.parse(call.stdout) as { rateForCashCurrency: Record<string, number> };
      expect(Object.keys(price.rateForCashCurrency).sort()).to.deep.equal(["CHF", "EUR", "USD"]);
      const refused = await bufCurl(["--protocol", "grpc", `${t.url}/${TOKEN_SERVICE}/GetPrice`]);
      expect(refused.code).to.not.equal(0);
      expect(refused.stderr).to.match(/unauthenticated/i);
    });

    it("lets buf curl call ListTrades and GetTradeSummary; a bad filter is INVALID_ARGUMENT naming it", async function () {
      const list = await bufCurl([
        "--protocol",
        "grpc",
        "-H",
        `api_key: ${API_KEY}`,
        "-d",
        JSON.stringify({ kind: "sell", limit: 10 }),
        `${t.url}/${TOKEN_SERVICE}/ListTrades`,
      ]);
      expect(list.code, list.stderr).to.equal(0);
      expect(JSON.parse(list.stdout)).to.deep.equal({}); // no trades, no next cursor: every field at its default
      const summary = await bufCurl([
        "--protocol",
        "grpc",
        "-H",
        `api_key: ${API_KEY}`,
        "-d",
        JSON.stringify({ since: "2026-11-01T00:00:00Z" }),
        `${t.url}/${TOKEN_SERVICE}/GetTradeSummary`,
      ]);
      expect(summary.code, summary.stderr).to.equal(0);
      expect(JSON.parse(summary.stdout)).to.deep.equal({ since: "2026-11-01T00:00:00.000Z" });
      const bad = await bufCurl([
        "--protocol",
        "grpc",
        "-H",
        `api_key: ${API_KEY}`,
        "-d",
        JSON.stringify({ limit: 501 }),
        `${t.url}/${TOKEN_SERVICE}/ListTrades`,
      ]);
      expect(bad.code).to.not.equal(0);
      expect(bad.stderr)
        .to.match(/invalid_argument/i)
        .and.match(/limit: must be an integer from 1 to 500/);
    });

    it("lets buf curl call Quote, then Sell naming the quote in quote-id metadata: once over gRPC-Web, then ALREADY_EXISTS over Connect", async function () {
      const quote = await bufCurl([
        "--protocol",
        "grpc",
        "-H",
        `api_key: ${API_KEY}`,
        "-d",
        JSON.stringify({ kind: "sell", amount: "1.5", usdAddress: USDT.address, slippageBps: 0 }),
        `${t.url}/${TOKEN_SERVICE}/Quote`,
      ]);
      expect(quote.code, quote.stderr).to.equal(0);
      const answer = JSON.parse(quote.stdout) as { quoteId: string; expectedOut: unknown; minOut: unknown };
      expect(answer.expectedOut).to.deep.equal({ value: "1.875", baseUnits: "1875000" });
      expect(answer.minOut).to.deep.equal(answer.expectedOut);
      const sell = (protocol: string) =>
        bufCurl([
          "--protocol",
          protocol,
          "-H",
          `api_key: ${API_KEY}`,
          "-H",
          `quote-id: ${answer.quoteId}`,
          "-d",
          JSON.stringify({ userAddress: WALLET, destinatary: CUSTOMER, amount: "1.5", usdAddress: USDT.address }),
          `${t.url}/${TOKEN_SERVICE}/Sell`,
        ]);
      const first = await sell("grpcweb");
      expect(first.code, first.stderr).to.equal(0);
      const second = await sell("connect");
      expect(second.code).to.not.equal(0);
      expect(second.stderr)
        .to.match(/already_exists/i)
        .and.match(/quote_used/);
      expect(t.trade.nonce).to.equal(1);
    });

    it("answers NOT_FOUND for an unknown symbol and goes on answering on the same stream (buf curl reports it)", async function () {
      const call = await bufCurl(["--protocol", "grpc", `${t.url}/nope.v1.Nothing/Call`]);
      expect(call.code).to.not.equal(0);
      expect(call.stderr).to.match(/nope\.v1\.Nothing/);
    });
  });

  describe("grpc.health.v1", function () {
    it("Check follows readiness, needs no api_key, and refuses an unknown service with NOT_FOUND (buf curl)", async function () {
      const health = `${t.url}/grpc.health.v1.Health/Check`;
      const serving = await bufCurl(["--protocol", "grpc", "-d", "{}", health]);
      expect(serving.code, serving.stderr).to.equal(0);
      expect(JSON.parse(serving.stdout)).to.deep.equal({ status: "SERVING" });
      const named = await bufCurl(["--protocol", "grpc", "-d", JSON.stringify({ service: TOKEN_SERVICE }), health]);
      expect(JSON.parse(named.stdout)).to.deep.equal({ status: "SERVING" });

      t.readiness.result = { ready: false, detail: "the chain did not answer" };
      const notServing = await bufCurl(["--protocol", "grpc", "-d", "{}", health]);
      expect(JSON.parse(notServing.stdout)).to.deep.equal({ status: "NOT_SERVING" });
      t.readiness.result = new Error("timeout");
      expect(JSON.parse((await bufCurl(["--protocol", "grpc", "-d", "{}", health])).stdout)).to.deep.equal({
        status: "NOT_SERVING",
      });

      const unknown = await bufCurl(["--protocol", "grpc", "-d", '{"service":"nope.v1.Nothing"}', health]);
      expect(unknown.code).to.not.equal(0);
      expect(unknown.stderr).to.match(/not_found/i);
      // gRPC-Web and Connect reach it too.
      for (const protocol of ["grpcweb", "connect"]) {
        const other = await bufCurl(["--protocol", protocol, "-d", "{}", health]);
        expect(other.code, `${protocol}: ${other.stderr}`).to.equal(0);
        expect(JSON.parse(other.stdout)).to.deep.equal({ status: "NOT_SERVING" });
      }
    });

    it("Watch sends the status, each change, then NOT_SERVING and the end of the stream when the server shuts down (grpc-js)", async function () {
      const client = healthClient(t.url);
      const seen: string[] = [];
      const call = client.Watch!({ service: "" }) as grpc.ClientReadableStream<{ status: string }>;
      const ended = new Promise<{ code: number }>((resolve) => call.on("status", resolve));
      call.on("data", (message: { status: string }) => seen.push(message.status));
      call.on("error", () => {});
      const waitFor = async (count: number) => {
        const until = Date.now() + 10_000;
        while (seen.length < count && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      };
      await waitFor(1);
      expect(seen).to.deep.equal(["SERVING"]);
      t.readiness.result = { ready: false, detail: "wallet out of gas" };
      await waitFor(2);
      expect(seen).to.deep.equal(["SERVING", "NOT_SERVING"]);
      t.readiness.result = { ready: true, detail: "ok" };
      await waitFor(3);
      expect(seen).to.deep.equal(["SERVING", "NOT_SERVING", "SERVING"]);

      const started = Date.now();
      await t.close(); // the drain does not wait for the Watch (the test server's grace is 5 s)
      expect(Date.now() - started).to.be.below(3_000);
      expect((await ended).code).to.equal(grpc.status.OK);
      expect(seen).to.deep.equal(["SERVING", "NOT_SERVING", "SERVING", "NOT_SERVING"]);
      client.close();
    });

    it("Watch of an unknown service answers SERVICE_UNKNOWN", async function () {
      const client = healthClient(t.url);
      const call = client.Watch!({ service: "nope.v1.Nothing" }) as grpc.ClientReadableStream<{ status: string }>;
      const first = await new Promise<{ status: string }>((resolve) => call.once("data", resolve));
      expect(first.status).to.equal("SERVICE_UNKNOWN");
      call.on("error", () => {});
      call.cancel();
      client.close();
    });
  });

  describe("services and methods the server does not have", function () {
    it("answers gRPC UNIMPLEMENTED (12), not HTTP 404, for an unknown service and an unknown method (grpc-js)", async function () {
      const service = await rawUnary(t.url, "/nope.v1.Nothing/Call", API_KEY);
      expect(service.code).to.equal(grpc.status.UNIMPLEMENTED);
      expect(service.details).to.include("nope.v1.Nothing/Call");
      const method = await rawUnary(t.url, `/${TOKEN_SERVICE}/Steal`, API_KEY);
      expect(method.code).to.equal(grpc.status.UNIMPLEMENTED);
    });

    it("answers gRPC-Web unimplemented and Connect 404 unimplemented; a plain JSON POST keeps the JSON routes' 404", async function () {
      const web = await fetch(`${t.url}/nope.v1.Nothing/Call`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto" },
        body: new Uint8Array(5),
      });
      expect(web.status).to.equal(200);
      expect(web.headers.get("grpc-status")).to.equal("12");
      const connect = await fetch(`${t.url}/nope.v1.Nothing/Call`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1" },
        body: "{}",
      });
      expect(connect.status).to.equal(404);
      expect(await connect.json()).to.deep.include({ code: "unimplemented" });
      const json = await fetch(`${t.url}/nope.v1.Nothing/Call`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(json.status).to.equal(404);
      expect(await json.json()).to.deep.include({ code: "not_found" });
    });
  });
});
