/**
 * What a client without a key (or with one, misbehaving) could hold or stall, each reproduced
 * on the real one-port server: idle HTTP/2 connections, half-closed sockets, connections from
 * one address, pipelining and HEADERS+RST_STREAM floods, and streams whose body never comes.
 * The limits are lowered for the tests (the defaults are in server-limits.ts's DEFAULT_LIMITS).
 */
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";

import { expect } from "chai";

import { DEFAULT_LIMITS } from "../../../adapters/transport/index.js";
import { API_KEY, getJson, startTestServer, tradeBody, type TestServer } from "./helpers.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, probe: () => boolean, ms = 5_000): Promise<void> {
  const until = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** An HTTP/2 client that sends the connection preface and an empty SETTINGS frame, then nothing. */
const PREFACE_AND_SETTINGS = Buffer.concat([
  Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
]);

/**
 * Whether this process holds the server's side of a TCP connection: a line of /proc/net/tcp (or
 * tcp6) from the server's port to the client's with a non-zero inode, a file descriptor still
 * open. A socket the server has closed is gone, or orphaned (inode 0) while the kernel finishes it.
 */
function serverHolds(serverPort: number, clientPort: number): boolean {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [local, remote, inode] = [fields[1], fields[2], fields[9]];
      if (local?.endsWith(`:${hex(serverPort)}`) && remote?.endsWith(`:${hex(clientPort)}`) && inode !== "0")
        return true;
    }
  }
  return false;
}

describe("a hostile or unlucky client", function () {
  let t: TestServer | undefined;

  afterEach(async function () {
    await t?.close();
    t = undefined;
  });

  it("cannot hold an HTTP/2 connection that says nothing after its preface", async function () {
    t = await startTestServer({ limits: { http2IdleMs: 300, closeGraceMs: 200 } });
    const socket = net.connect(t.server.port, "127.0.0.1");
    socket.on("data", () => {}); // the server's SETTINGS, then its GOAWAY
    socket.on("error", () => {});
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write(PREFACE_AND_SETTINGS);
    await closed;
    await waitFor("the server to let the connection go", () => t!.server.connections() === 0);
  });

  it("cannot hold an HTTP/2 connection's socket by never reading: it is closed after the idle limit and the grace", async function () {
    // The idle limit lowered from 60 s (DEFAULT_LIMITS.http2IdleMs) to keep the test short: the
    // path is the default's, only the timer is shorter.
    const limits = { http2IdleMs: 300, closeGraceMs: 200 };
    t = await startTestServer({ limits });
    const socket = net.connect(t.server.port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.pause(); // reads nothing: the server's SETTINGS, then its GOAWAY, stay unread
    socket.write(PREFACE_AND_SETTINGS);
    const clientPort = socket.localPort!;
    const started = Date.now();
    await waitFor("the server to take the connection", () => t!.server.connections() === 1);
    expect(serverHolds(t.server.port, clientPort)).to.equal(true);
    await waitFor("the server to close its socket", () => !serverHolds(t!.server.port, clientPort), 5_000);
    const elapsed = Date.now() - started;
    console.log(
      `      a paused h2c client's socket let go after ${elapsed} ms (idle ${limits.http2IdleMs} ms + grace ${limits.closeGraceMs} ms)`,
    );
    // The timers' own sum and up to 2 s of a loaded machine's lag: the point is that it goes, not the 60 s default.
    expect(elapsed).to.be.below(limits.http2IdleMs + limits.closeGraceMs + 2_000);
    // The kernel lets the socket go when it is destroyed; the server counts it gone at the
    // socket's "close" event, a turn of the event loop later, so the count is waited for.
    await waitFor("the server to count the connection gone", () => t!.server.connections() === 0, 1_000);
    socket.destroy();
  });

  it("cannot keep a socket half-closed after a refused request: destroyed after a short grace", async function () {
    t = await startTestServer({ limits: { closeGraceMs: 300 } });
    const socket = net.connect({ port: t.server.port, host: "127.0.0.1", allowHalfOpen: true });
    let answer = "";
    socket.on("data", (d) => (answer += d.toString()));
    socket.on("error", () => {});
    socket.write("NOT-A-METHOD / HTTP/1.1\r\nHost: x\r\n\r\n");
    await new Promise((resolve) => socket.once("end", resolve)); // the server's FIN: this client never sends its own
    expect(answer).to.match(/^HTTP\/1\.1 400 /);
    expect(t.server.connections()).to.equal(1);
    await waitFor("the server to destroy the half-closed socket", () => t!.server.connections() === 0, 3_000);
    socket.destroy();
  });

  it("cannot open more than the limit of connections from one address", async function () {
    t = await startTestServer({ limits: { connectionsPerAddress: 5 } });
    const sockets = Array.from({ length: 12 }, () => {
      const socket = net.connect(t!.server.port, "127.0.0.1");
      socket.on("error", () => {});
      return socket;
    });
    const closed = sockets.map(
      (socket) =>
        new Promise<boolean>((resolve) => {
          socket.once("close", () => resolve(true));
          setTimeout(() => resolve(false), 1_000);
        }),
    );
    expect((await Promise.all(closed)).filter(Boolean)).to.have.length(7);
    expect(t.server.connections()).to.equal(5);
    // Another client (here: the same one, once it lets go of one) is served.
    for (const socket of sockets) socket.destroy();
    await waitFor("the connections to go", () => t!.server.connections() === 0);
    expect((await getJson(`${t.url}/healthz`, { apiKey: null })).status).to.equal(200);
  });

  it("is told a sane limit of concurrent HTTP/2 streams", async function () {
    t = await startTestServer();
    const session = http2.connect(t.url);
    await new Promise((resolve) => session.once("remoteSettings", resolve));
    expect(session.remoteSettings.maxConcurrentStreams).to.equal(DEFAULT_LIMITS.streamsPerConnection);
    session.destroy();
  });

  it("runs nothing for HTTP/2 streams it resets at once (the rapid-reset flood), and new clients are answered", async function () {
    t = await startTestServer();
    let priced = 0;
    const getPrice = t.price.getPrice.bind(t.price);
    t.price.getPrice = () => {
      priced++;
      return getPrice();
    };
    for (let round = 0; round < 4; round++) {
      const session = http2.connect(t.url);
      session.on("error", () => {});
      await new Promise((resolve) => session.once("connect", resolve));
      for (let i = 0; i < 250; i++) {
        const stream = session.request({ ":method": "GET", ":path": "/api/v1/token/price", api_key: API_KEY });
        stream.on("error", () => {});
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
      session.destroy();
    }
    const started = Date.now();
    expect((await getJson(`${t.url}/healthz`, { apiKey: null })).status).to.equal(200);
    console.log(
      `      after 1,000 reset streams: /healthz answered in ${Date.now() - started} ms; ${priced} handlers ran`,
    );
    expect(priced).to.be.below(20);
  });

  it("reads a client that pipelines without reading its answers no deeper than the limit, and closes it", async function () {
    t = await startTestServer({ limits: { pipelinedPerConnection: 16, closeGraceMs: 300 } });
    let priced = 0;
    const getPrice = t.price.getPrice.bind(t.price);
    t.price.getPrice = () => {
      priced++;
      return getPrice();
    };
    const socket = net.connect(t.server.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.pause(); // never reads its answers
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write(`GET /api/v1/token/price HTTP/1.1\r\nHost: x\r\napi_key: ${API_KEY}\r\n\r\n`.repeat(2_000));
    await sleep(300);
    const started = Date.now();
    expect((await getJson(`${t.url}/healthz`, { apiKey: null })).status).to.equal(200);
    console.log(
      `      during a 2,000-deep pipeline: /healthz answered in ${Date.now() - started} ms; ${priced} handlers ran`,
    );
    expect(priced).to.be.at.most(16);
    socket.resume();
    await closed;
  });

  it("parses nothing past the first request over the pipelining limit: 16 answers, one 503, then the close", async function () {
    // Node parses a whole read (64 KiB, some 1,900 of these requests) before the service can
    // stop it; each parsed request is a request object, an answer and an abort on close: seconds
    // of the only thread for a flood of such connections, while new clients wait.
    t = await startTestServer({ limits: { pipelinedPerConnection: 16, closeGraceMs: 300 } });
    // Every request Node parses past the limit is refused with its own 503: counted here.
    let refusals = 0;
    const { writeHead } = http.ServerResponse.prototype;
    http.ServerResponse.prototype.writeHead = function (this: http.ServerResponse, ...args: unknown[]) {
      if (args[0] === 503) refusals++;
      return (writeHead as (...a: unknown[]) => http.ServerResponse).apply(this, args);
    } as typeof writeHead;
    const chunks: Buffer[] = [];
    try {
      const socket = net.connect(t.server.port, "127.0.0.1");
      socket.on("error", () => {});
      socket.pause();
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      const closed = new Promise((resolve) => socket.once("close", resolve));
      socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2_000));
      await sleep(300);
      socket.resume();
      await closed;
    } finally {
      http.ServerResponse.prototype.writeHead = writeHead;
    }
    const statuses =
      Buffer.concat(chunks)
        .toString("latin1")
        .match(/HTTP\/1\.1 \d{3}/g) ?? [];
    expect(statuses.filter((s) => s.endsWith("200"))).to.have.length(16);
    expect(statuses.filter((s) => s.endsWith("503"))).to.have.length(1);
    expect(statuses).to.have.length(17);
    expect(refusals).to.equal(1);
  });

  it("still answers, in order, every request a reading client pipelines within the limit, bodies included", async function () {
    // A CRLF CRLF inside a body (JSON whitespace here) and a chunked body must not throw the
    // pipelining bookkeeping off.
    t = await startTestServer();
    const json = JSON.stringify(tradeBody()).replace("{", "{\r\n\r\n");
    const buy = `POST /api/v1/token/buy HTTP/1.1\r\nhost: x\r\napi_key: ${API_KEY}\r\ncontent-type: application/json\r\n`;
    const requests = [
      "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
      `${buy}content-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
      `GET /api/v1/token/price HTTP/1.1\r\nhost: x\r\napi_key: ${API_KEY}\r\n\r\n`,
      `${buy}transfer-encoding: chunked\r\n\r\n${Buffer.byteLength(json).toString(16)}\r\n${json}\r\n0\r\n\r\n`,
    ];
    const socket = net.connect(t.server.port, "127.0.0.1");
    socket.on("error", () => {});
    let answers = "";
    socket.on("data", (chunk: Buffer) => (answers += chunk.toString("latin1")));
    const last = "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    socket.write(`${requests.join("")}${requests.join("")}${last}`);
    await new Promise((resolve) => socket.once("close", resolve));
    const statuses = [...answers.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
    expect(statuses).to.deep.equal(Array.from({ length: 9 }, () => "200"));
    expect(t.trade.calls.map((call) => call.kind)).to.deep.equal(["buy", "buy", "buy", "buy"]);
  });

  it("resets an HTTP/2 stream whose body does not come in time", async function () {
    t = await startTestServer({ limits: { bodyMs: 300 } });
    const session = http2.connect(t.url);
    session.on("error", () => {});
    const stream = session.request({
      ":method": "POST",
      ":path": "/tokentrade.v1.TokenService/Sell",
      "content-type": "application/grpc",
      te: "trailers",
      api_key: API_KEY,
    });
    stream.on("error", () => {});
    stream.resume();
    const started = Date.now();
    await new Promise((resolve) => stream.once("close", resolve));
    expect(Date.now() - started).to.be.within(250, 3_000);
    expect(stream.rstCode).to.equal(http2.constants.NGHTTP2_CANCEL);
    expect(t.trade.calls).to.have.length(0);
    session.destroy();
  });

  it("is refused at once when it calls an RPC without a key: its body is never waited for", async function () {
    t = await startTestServer();
    const session = http2.connect(t.url);
    session.on("error", () => {});
    const stream = session.request({
      ":method": "POST",
      ":path": "/tokentrade.v1.TokenService/Sell",
      "content-type": "application/grpc",
      te: "trailers",
    });
    stream.on("error", () => {});
    const headers = await new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once("response", resolve));
    expect(headers["grpc-status"]).to.equal("16");
    expect(decodeURIComponent(String(headers["grpc-message"]))).to.match(/api_key/);
    session.destroy();
  });

  it("is answered resource_exhausted at once when a message's prefix declares 4 GB, on every path, and its stream is reset", async function () {
    this.timeout(20_000);
    t = await startTestServer();
    const { url } = t;
    const port = t.server.port;
    const sell = "/tokentrade.v1.TokenService/Sell";
    // An envelope's prefix (flags, 32-bit length) declaring 4 GB, and nothing after it: the stream stays open.
    const prefix = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
    const key = { api_key: API_KEY };

    /** Over h2c: the answer's code, when it came and when the server closed the stream (the client never ends it). */
    const overH2c = async (headers: http2.OutgoingHttpHeaders, body: Buffer) => {
      const session = http2.connect(url);
      session.on("error", () => {});
      const started = Date.now();
      const stream = session.request({ ":method": "POST", ":path": sell, ...headers }, { endStream: false });
      stream.on("error", () => {});
      let text = "";
      let code: string | undefined;
      let answeredMs = Infinity;
      const answered = (fields: http2.IncomingHttpHeaders) => {
        code ??= fields["grpc-status"] as string | undefined;
        if (code !== undefined) answeredMs = Math.min(answeredMs, Date.now() - started);
      };
      stream.on("response", answered);
      stream.on("trailers", answered);
      stream.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
      stream.write(body);
      const closedMs = await new Promise<number>((resolve) => {
        stream.once("close", () => resolve(Date.now() - started));
        setTimeout(() => resolve(Infinity), 3_000);
      });
      const rstCode = stream.rstCode;
      session.destroy();
      return { code, text, answeredMs, closedMs, rstCode };
    };
    /** Over HTTP/1.1 (a chunked body left open): the answer, and when the server closed the connection. */
    const overHttp1 = async (head: string, body: Buffer) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.on("error", () => {});
      const started = Date.now();
      let text = "";
      let answeredMs = Infinity;
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        if (answeredMs === Infinity && /\r\n0\r\n\r\n$|"code":/.test(text)) answeredMs = Date.now() - started;
      });
      socket.write(Buffer.concat([Buffer.from(head, "latin1"), body]));
      const closedMs = await new Promise<number>((resolve) => {
        socket.once("close", () => resolve(Date.now() - started));
        setTimeout(() => resolve(Infinity), 6_000);
      });
      socket.destroy();
      return { text, answeredMs, closedMs };
    };
    const chunked = (bytes: Buffer) =>
      Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from("\r\n")]);
    const http1Head = (contentType: string, framing = "transfer-encoding: chunked") =>
      `POST ${sell} HTTP/1.1\r\nhost: x\r\ncontent-type: ${contentType}\r\napi_key: ${API_KEY}\r\n` +
      `connect-protocol-version: 1\r\n${framing}\r\n\r\n`;
    const base64 = Buffer.from(prefix.toString("base64"), "latin1");

    const [lean, connectGrpc, health, grpcWeb, grpcWebText, connectH2, grpcWeb1, grpcWebText1, connect1] =
      await Promise.all([
        overH2c({ "content-type": "application/grpc", te: "trailers", ...key }, prefix),
        overH2c({ "content-type": "application/grpc+json", te: "trailers", ...key }, prefix),
        overH2c(
          { ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers" },
          prefix,
        ),
        overH2c({ "content-type": "application/grpc-web+proto", ...key }, prefix),
        overH2c({ "content-type": "application/grpc-web-text", ...key }, base64),
        // Connect's unary protocol has no envelope: its declared size is the Content-Length.
        overH2c(
          {
            "content-type": "application/proto",
            "connect-protocol-version": "1",
            "content-length": "4294967295",
            ...key,
          },
          Buffer.from([0x0a]),
        ),
        overHttp1(http1Head("application/grpc-web+proto"), chunked(prefix)),
        overHttp1(http1Head("application/grpc-web-text"), chunked(base64)),
        overHttp1(http1Head("application/proto", "content-length: 4294967295"), Buffer.from([0x0a])),
      ]);
    const grpcAnswers = { lean, connectGrpc, health };
    for (const [path, outcome] of Object.entries(grpcAnswers)) {
      expect(outcome.code, path).to.equal("8");
      expect(outcome.answeredMs, path).to.be.below(3_000);
      // Reset by the server once answered: the client is not left sending a body nobody reads.
      expect(outcome.closedMs, path).to.be.below(3_000);
      expect(outcome.rstCode, path).to.equal(http2.constants.NGHTTP2_NO_ERROR);
    }
    const grpcWebTrailer = (text: string) => (/grpc-status: ?(\d+)/.exec(text) ?? [])[1];
    expect(grpcWebTrailer(grpcWeb.text)).to.equal("8");
    expect(grpcWebTrailer(Buffer.from(grpcWebText.text, "base64").toString("latin1"))).to.equal("8");
    expect(connectH2.text).to.include('"code":"resource_exhausted"');
    for (const [path, outcome] of Object.entries({ grpcWeb, grpcWebText, connectH2 })) {
      expect(outcome.closedMs, path).to.be.below(3_000);
      expect(outcome.rstCode, path).to.equal(http2.constants.NGHTTP2_NO_ERROR);
    }
    expect(grpcWebTrailer(grpcWeb1.text)).to.equal("8");
    const textBody = /\r\n\r\n[0-9a-f]+\r\n([A-Za-z0-9+/=]+)\r\n/.exec(grpcWebText1.text)?.[1] ?? "";
    expect(grpcWebTrailer(Buffer.from(textBody, "base64").toString("latin1"))).to.equal("8");
    expect(connect1.text).to.include('"code":"resource_exhausted"');
    for (const [path, outcome] of Object.entries({ grpcWeb1, grpcWebText1, connect1 })) {
      expect(outcome.answeredMs, path).to.be.below(3_000);
      // HTTP/1.1 has no stream to reset: the connection is closed after a bounded wait for the rest
      // of the body (json-http.ts's LINGER_MS, 3 s), not left to Node's keep-alive or request timeouts.
      expect(outcome.closedMs, path).to.be.below(5_000);
    }
    expect(t.trade.calls).to.have.length(0);
  });

  it("is refused unstarted, not queued, when the service holds too many requests", async function () {
    t = await startTestServer({ limits: { requestsInFlight: 2 } });
    t.trade.delayMs = 2_000; // the third arrives while the first two are held, however slow the machine
    const body = {
      userAddress: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
      destinatary: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
      amount: "1",
      usdAddress: "0xdAC17F958D2ee523a2206206994597C13D831ec7",
    };
    const post = () =>
      fetch(`${t!.url}/api/v1/token/buy`, {
        method: "POST",
        headers: { api_key: API_KEY, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const answers = await Promise.all([post(), post(), post()]);
    expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 200, 503]);
    expect(answers.find((a) => a.status === 503)!.body).to.include("the request was not started");
    expect(t.trade.calls).to.have.length(2);
  });
});
