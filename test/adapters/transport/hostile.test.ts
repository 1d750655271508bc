/**
 * What a client without a key (or with one, misbehaving) could hold or stall, each reproduced
 * on the real one-port server: idle HTTP/2 connections, half-closed sockets, connections from
 * one address, pipelining and HEADERS+RST_STREAM floods, and streams whose body never comes.
 * The limits are lowered for the tests (the defaults are in server.ts's DEFAULT_LIMITS).
 */
import * as http2 from "node:http2";
import * as net from "node:net";

import { expect } from "chai";

import { DEFAULT_LIMITS } from "../../../adapters/transport/server.js";
import { API_KEY, getJson, startTestServer, type TestServer } from "./helpers.js";

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

  it("is refused unstarted, not queued, when the service holds too many requests", async function () {
    t = await startTestServer({ limits: { requestsInFlight: 2 } });
    t.trade.delayMs = 300;
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
