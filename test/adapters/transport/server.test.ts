import * as http2 from "node:http2";
import * as https from "node:https";
import * as net from "node:net";

import { createClient } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createConnectTransport } from "@connectrpc/connect-node";
import { expect } from "chai";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  PROTO_ROOT,
  WALLET,
  getJson,
  grpcCall,
  grpcClient,
  postJson,
  startTestServer,
  tradeBody,
  type TestServer,
} from "./helpers.js";
import { selfSignedCertificate, type SelfSigned } from "../../helpers/tls.js";
import { waitFor } from "../../helpers/wait.js";

/** A TCP proxy that delivers the client's first chunk in two pieces, 30 ms apart. */
async function splittingProxy(targetPort: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    sockets.add(client).add(upstream);
    let first = true;
    client.on("data", (data) => {
      if (first && data.length > 5) {
        first = false;
        client.pause();
        upstream.write(data.subarray(0, 5));
        setTimeout(() => {
          upstream.write(data.subarray(5));
          client.resume();
        }, 30);
        return;
      }
      first = false;
      upstream.write(data);
    });
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    port: (proxy.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        proxy.close(() => resolve());
      }),
  };
}

function grpcTrade(amount = "1") {
  return { user_address: WALLET, destinatary: CUSTOMER, amount, usd_address: DAI.address };
}

describe("the one-port server", function () {
  let t: TestServer;

  afterEach(async function () {
    await t?.close();
  });

  describe("protocol detection", function () {
    it("serves HTTP/1.1 and h2c gRPC even when the first bytes arrive in pieces", async function () {
      t = await startTestServer();
      const proxy = await splittingProxy(t.server.port);
      try {
        const viaProxy = `http://127.0.0.1:${proxy.port}`;
        const json = await getJson(`${viaProxy}/api/v1/token/price`);
        expect(json.status).to.equal(200);
        const client = grpcClient(viaProxy);
        const { response, error } = await grpcCall(client, "Sell", grpcTrade(), API_KEY);
        client.close();
        expect(error, error?.message).to.equal(undefined);
        expect(response!.events).to.have.length(5);
      } finally {
        await proxy.close();
      }
    });

    it("answers a raw HTTP/1.1 request typed one byte at a time", async function () {
      t = await startTestServer();
      const socket = net.connect(t.server.port, "127.0.0.1");
      let answer = "";
      socket.on("data", (d) => (answer += d.toString()));
      // Listened for before the last byte goes out: the answer and the close may come during the last pause.
      const closed = new Promise((resolve) => socket.once("close", resolve));
      const request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
      for (const char of request) {
        socket.write(char);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      await closed;
      expect(answer).to.match(/^HTTP\/1\.1 200 OK/);
      expect(answer).to.include('{"status":"ok"}');
    });

    it("answers a request target URL parsing refuses (GET /\\) with a JSON 404, and keeps serving", async function () {
      t = await startTestServer();
      const raw = (target: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = net.connect(t!.server.port, "127.0.0.1");
          let answer = "";
          socket.on("data", (d) => (answer += d.toString()));
          socket.on("error", reject);
          socket.on("close", () => resolve(answer));
          socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
        });
      const answer = await raw("/\\");
      expect(answer).to.match(/^HTTP\/1\.1 404 /);
      expect(answer).to.include('"code":"not_found"');
      expect(await raw("/healthz")).to.match(/^HTTP\/1\.1 200 OK/);
    });

    it("drops a connection that never says anything", async function () {
      t = await startTestServer({ sniffTimeoutMs: 150 });
      const socket = net.connect(t.server.port, "127.0.0.1");
      const started = Date.now();
      await new Promise((resolve) => socket.once("close", resolve));
      expect(Date.now() - started).to.be.within(100, 2_000);
    });

    it("h2c clients can use the JSON routes too", async function () {
      t = await startTestServer();
      const session = http2.connect(t.url);
      const [headers, body] = await new Promise<[http2.IncomingHttpHeaders, string]>((resolve, reject) => {
        const stream = session.request({
          ":path": "/api/v1/token/price",
          api_key: API_KEY,
          "x-request-id": "h2-req-1",
        });
        const chunks: Buffer[] = [];
        let response: http2.IncomingHttpHeaders = {};
        stream.on("response", (h) => (response = h));
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.on("end", () => resolve([response, Buffer.concat(chunks).toString("utf8")]));
        stream.on("error", reject);
      });
      session.close();
      expect(headers[":status"]).to.equal(200);
      expect(headers["x-request-id"]).to.equal("h2-req-1");
      expect(headers["content-type"]).to.equal("application/json");
      expect(Number(headers["content-length"])).to.equal(Buffer.byteLength(body));
      expect(JSON.parse(body)).to.have.property("rateForCashCurrency");
    });
  });

  describe("request ids", function () {
    it("echoes an acceptable incoming x-request-id and logs every line of the request with it", async function () {
      t = await startTestServer();
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ amount: "abc" }), {
        headers: { "x-request-id": "client-req-42" },
      });
      expect(res.headers.get("x-request-id")).to.equal("client-req-42");
      const lines = t.logs.records().filter((r) => r.reqId === "client-req-42");
      expect(lines.map((l) => l.msg)).to.include.members(["request refused", "request completed"]);
      const completed = lines.find((l) => l.msg === "request completed")!;
      expect(completed).to.include({ method: "POST", path: "/api/v1/token/sell", status: 400 });
    });

    it("replaces a missing or unsafe x-request-id with a UUID", async function () {
      t = await startTestServer();
      for (const headers of [
        {},
        { "x-request-id": "bad id\twith spaces" },
        { "x-request-id": "x".repeat(200) },
      ] as Array<Record<string, string>>) {
        const res = await getJson(`${t.url}/healthz`, { headers });
        expect(res.headers.get("x-request-id")).to.match(/^[0-9a-f-]{36}$/);
      }
    });

    it("gives gRPC calls a request id too", async function () {
      t = await startTestServer();
      const client = grpcClient(t.url);
      const metadata = new grpc.Metadata();
      metadata.set("api_key", "wrong-key-0123456789");
      metadata.set("x-request-id", "grpc-req-7");
      await new Promise<void>((resolve) => client.GetPrice!({}, metadata, () => resolve()));
      client.close();
      const lines = t.logs.records().filter((r) => r.reqId === "grpc-req-7");
      expect(lines.map((l) => l.msg)).to.include.members(["rpc refused", "request completed"]);
    });
  });

  describe("secrets in logs", function () {
    it("never writes an api_key, right or wrong, into the logs", async function () {
      t = await startTestServer();
      const wrong = "wrong-but-secret-guess-123";
      await postJson(`${t.url}/api/v1/token/sell`, tradeBody());
      await postJson(`${t.url}/api/v1/token/sell`, tradeBody(), { apiKey: wrong });
      await getJson(`${t.url}/api/v1/token/price`, { apiKey: wrong });
      const client = grpcClient(t.url);
      await grpcCall(client, "Sell", grpcTrade(), API_KEY);
      await grpcCall(client, "Sell", grpcTrade(), wrong);
      client.close();
      await createClient(TokenService, createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" })).getPrice(
        {},
        { headers: { api_key: API_KEY } },
      );
      expect(t.logs.lines.length).to.be.greaterThan(8);
      expect(t.logs.text).not.to.include(API_KEY);
      expect(t.logs.text).not.to.include(wrong);
    });

    it("redacts an api_key that a logged object carries", async function () {
      t = await startTestServer();
      t.log.info(
        { headers: { api_key: API_KEY }, req: { headers: { api_key: API_KEY } }, api_key: API_KEY },
        "careless line",
      );
      expect(t.logs.text).to.include("careless line");
      expect(t.logs.text).not.to.include(API_KEY);
    });
  });

  describe("a client that goes away mid-request", function () {
    it("is logged as what it is, at info, with no error and no stack, and nothing runs", async function () {
      t = await startTestServer();
      for (const path of ["/api/v1/token/sell", "/tokentrade.v1.TokenService/Sell"]) {
        const socket = net.connect(t.server.port, "127.0.0.1");
        const gone = new Promise((resolve) => socket.once("close", resolve));
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: x\r\napi_key: ${API_KEY}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"userAd`,
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
        socket.destroy();
        await gone;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      const records = t.logs.records();
      expect(
        records.filter((r) => (r.level as number) >= 40),
        t.logs.text,
      ).to.deep.equal([]);
      expect(
        records.some((r) => r.msg === "client went away before its request body arrived; nothing was done"),
      ).to.equal(true);
      expect(t.trade.calls).to.have.length(0);
    });
  });

  describe("graceful shutdown", function () {
    it("lets in-flight HTTP/1.1 and HTTP/2 trades finish, then refuses new connections", async function () {
      t = await startTestServer();
      t.trade.delayMs = 1_000;
      const client = grpcClient(t.url);
      const json = postJson(`${t.url}/api/v1/token/sell`, tradeBody());
      const rpc = grpcCall(client, "Buy", grpcTrade("2"), API_KEY);
      // Both trades started (and held for a second), however long the gRPC channel took to connect.
      await waitFor("both trades to start", async () => t!.trade.calls.length >= 2, 10_000, 10);
      expect(t.server.inFlight()).to.equal(2);
      const started = Date.now();
      const closing = t.server.close();
      const [jsonResult, rpcResult] = await Promise.all([json, rpc]);
      await closing;
      client.close();
      expect(jsonResult.status, jsonResult.text).to.equal(200);
      expect(rpcResult.error, rpcResult.error?.message).to.equal(undefined);
      expect(rpcResult.response!.events).to.have.length(3);
      expect(t.trade.nonce).to.equal(2);
      expect(Date.now() - started).to.be.lessThan(3_000);
      let refused: unknown;
      try {
        await fetch(`${t.url}/healthz`);
      } catch (error) {
        refused = error;
      }
      expect(refused, "a request after close must fail").to.be.instanceOf(Error);
    });

    it("starts no pipelined request on a connection it is closing: each is answered, or refused before anything ran", async function () {
      t = await startTestServer();
      t.trade.delayMs = 300;
      const body = JSON.stringify(tradeBody());
      const trade = `POST /api/v1/token/sell HTTP/1.1\r\nHost: x\r\napi_key: ${API_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const socket = net.connect(t.server.port, "127.0.0.1");
      let answer = "";
      socket.on("data", (d) => (answer += d.toString()));
      const closed = new Promise((resolve) => socket.once("close", resolve));
      socket.write(trade); // the first is in flight when the shutdown begins…
      await waitFor("the first trade to start", async () => t!.trade.calls.length >= 1, 10_000, 10);
      const closing = t.server.close();
      socket.write(trade + trade); // …and two more arrive on its connection, pipelined
      await closed;
      await closing;
      const statuses = [...answer.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
      const executed = t.trade.nonce;
      // Every trade that ran was answered 200; any other was refused (503) or never read.
      expect(statuses.filter((status) => status === 200)).to.have.length(executed);
      expect(statuses.every((status) => status === 200 || status === 503)).to.equal(true);
      expect(executed).to.equal(1);
      if (statuses.includes(503))
        expect(answer).to.include(
          '"code":"unavailable","message":"the service is shutting down: the request was not started; send it again"',
        );
    });

    it("does not wait for idle keep-alive connections", async function () {
      t = await startTestServer({ shutdownTimeoutMs: 10_000 });
      expect((await getJson(`${t.url}/healthz`)).status).to.equal(200);
      const client = grpcClient(t.url);
      await grpcCall(client, "GetPrice", {}, API_KEY);
      const started = Date.now();
      await t.server.close();
      client.close();
      expect(Date.now() - started).to.be.lessThan(1_000);
    });

    it("cuts requests that outlive the shutdown grace", async function () {
      t = await startTestServer({ shutdownTimeoutMs: 200 });
      t.trade.delayMs = 3_000;
      const json = postJson(`${t.url}/api/v1/token/sell`, tradeBody()).then(
        () => "answered",
        () => "cut",
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      await t.server.close();
      expect(Date.now() - started).to.be.lessThan(1_500);
      expect(await json).to.equal("cut");
    });
  });

  describe("with a certificate (TLS + ALPN)", function () {
    let tls: SelfSigned | undefined;
    let cert: Buffer;
    let key: Buffer;

    before(function () {
      tls = selfSignedCertificate();
      if (tls === undefined) this.skip(); // no openssl on this machine
      ({ cert, key } = tls);
    });

    after(function () {
      tls?.remove();
    });

    function startTls(): Promise<TestServer> {
      return startTestServer({ tls: { cert, key } });
    }

    it("serves HTTP/1.1 JSON over TLS", async function () {
      t = await startTls();
      expect(t.url).to.match(/^https:/);
      const { status, body, alpn } = await new Promise<{ status: number; body: string; alpn: string | false | null }>(
        (resolve, reject) => {
          const req = https.request(
            `${t.url}/api/v1/token/price`,
            { ca: cert, headers: { api_key: API_KEY }, ALPNProtocols: ["http/1.1"] } as https.RequestOptions,
            (res) => {
              const alpn = (res.socket as unknown as { alpnProtocol: string | false | null }).alpnProtocol;
              let text = "";
              res.on("data", (c: Buffer) => (text += c.toString()));
              res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, alpn }));
            },
          );
          req.on("error", reject);
          req.end();
        },
      );
      expect(alpn).to.equal("http/1.1");
      expect(status).to.equal(200);
      expect(JSON.parse(body).rateForCashCurrency).to.have.keys("CHF", "EUR", "USD");
    });

    it("serves gRPC over TLS with ALPN h2", async function () {
      t = await startTls();
      const definition = protoLoader.loadSync("tokentrade/v1/token.proto", {
        includeDirs: [PROTO_ROOT],
        keepCase: true,
        longs: String,
        defaults: true,
      });
      const proto = grpc.loadPackageDefinition(definition) as unknown as {
        tokentrade: { v1: { TokenService: grpc.ServiceClientConstructor } };
      };
      const client = new proto.tokentrade.v1.TokenService(
        `localhost:${t.server.port}`,
        grpc.credentials.createSsl(cert),
      );
      const { response, error } = await grpcCall(client, "Sell", grpcTrade(), API_KEY);
      client.close();
      expect(error, error?.message).to.equal(undefined);
      expect(response!.events).to.have.length(5);
    });

    it("serves Connect over TLS HTTP/2", async function () {
      t = await startTls();
      const client = createClient(
        TokenService,
        createConnectTransport({ baseUrl: t.url, httpVersion: "2", nodeOptions: { ca: cert } }),
      );
      const price = await client.getPrice({}, { headers: { api_key: API_KEY } });
      expect(price.rateForCashCurrency).to.have.keys("CHF", "EUR", "USD");
    });
  });
});
