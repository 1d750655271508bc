/**
 * An answer sent before the request body has been read (a refused api_key, a throttled address,
 * an oversize body) on HTTP/1.1: the service reads and drops the rest of the body, within bounds,
 * so that a client still writing it reads the answer instead of a broken pipe; and a client that
 * keeps sending forever has its connection closed within those bounds.
 */
import { spawn } from "node:child_process";
import * as net from "node:net";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import { DISCARD_LIMIT_BYTES, LINGER_MS } from "../../../adapters/transport/request/index.js";
import { DEFAULT_BODY_LIMIT_BYTES } from "../../../adapters/transport/json/index.js";
import { API_KEY, startTestServer, tradeBody, type TestServer } from "./helpers.js";
import { selfSignedCertificate, type SelfSigned } from "../../helpers/tls.js";

/** The connect-node client, run in a process of its own. */
const CLIENT = fileURLToPath(new URL("./connect-h1-client.ts", import.meta.url));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A trade request whose JSON encoding is close to the default body limit (16 KiB), under it. */
function largeTrade() {
  const { userAddress, destinatary, usdAddress } = tradeBody() as Record<string, string>;
  return { userAddress, destinatary, usdAddress, amount: "1".repeat(DEFAULT_BODY_LIMIT_BYTES - 1_000) };
}

describe("an early answer on HTTP/1.1", function () {
  let t: TestServer | undefined;

  afterEach(async function () {
    await t?.close();
    t = undefined;
  });

  describe("over TLS, to connect-node", function () {
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

    /** Runs connect-h1-client.ts in a process of its own; resolves with how many calls ended with each code. */
    async function callFromAnotherProcess(
      apiKey: string,
      calls: number,
      amountLength: number,
    ): Promise<Record<string, number>> {
      const child = spawn(
        process.execPath,
        ["--import", "tsx", CLIENT, t!.url, tls!.certFile, apiKey, String(calls), String(amountLength)],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      let out = "";
      child.stdout.on("data", (data: Buffer) => (out += data.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
      expect(code, out).to.equal(0);
      return JSON.parse(out) as Record<string, number>;
    }

    it("is read as unauthenticated by a client still writing its body, never as a broken pipe", async function () {
      t = await startTestServer({ tls: { cert, key }, rateLimits: {} });
      // Bodies of every size up to the limit: a refusal comes as each client starts writing its body.
      for (const amountLength of [100, 1_000, DEFAULT_BODY_LIMIT_BYTES - 1_000]) {
        expect(
          await callFromAnotherProcess("wrong-key-0000000000000", 20, amountLength),
          `${amountLength}`,
        ).to.deep.equal({
          "Unauthenticated: invalid api_key": 20,
        });
      }
      // With the right key, the body is read to the end and refused for what it holds.
      const outcomes = await callFromAnotherProcess(API_KEY, 2, DEFAULT_BODY_LIMIT_BYTES - 1_000);
      expect(Object.keys(outcomes)).to.have.length(1);
      expect(Object.keys(outcomes)[0]).to.match(/^InvalidArgument: amount/);
    });
  });

  /** A raw HTTP/1.1 request with a chunked body, its headers only; the body is the test's to send. */
  function openChunkedRequest(port: number, path: string, headers: string): net.Socket {
    // Half-open allowed: the client goes on sending after the server's FIN.
    const socket = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    socket.on("error", () => {});
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${headers}transfer-encoding: chunked\r\n\r\n`,
    );
    return socket;
  }

  for (const asksToClose of [false, true]) {
    it(`closes the connection of a client that keeps sending its body forever, within the bound${asksToClose ? " (Connection: close)" : ""}`, async function () {
      t = await startTestServer();
      const socket = openChunkedRequest(
        t.server.port,
        "/tokentrade.v1.TokenService/Sell",
        `api_key: wrong-key-0000000000\r\n${asksToClose ? "connection: close\r\n" : ""}`,
      );
      let answer = "";
      socket.on("data", (d: Buffer) => (answer += d.toString("latin1")));
      let endedAt = 0; // the server's FIN
      socket.once("end", () => (endedAt = Date.now()));
      const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now())));
      // A few bytes every 50 ms: never past the byte bound, only the time bound stops it.
      const started = Date.now();
      const trickle = setInterval(() => {
        if (!socket.destroyed) socket.write("a\r\n0123456789\r\n");
      }, 50);
      try {
        const at = await Promise.race([closed, sleep(LINGER_MS + 3_000).then(() => 0)]);
        expect(at, "the connection was not closed").to.not.equal(0);
        expect(at - started).to.be.within(LINGER_MS - 200, LINGER_MS + 1_500);
        expect(answer).to.match(/^HTTP\/1\.1 401 /);
        expect(answer).to.include('"code":"unauthenticated"');
        expect(answer).to.match(asksToClose ? /\r\nconnection: close\r\n/i : /\r\nconnection: keep-alive\r\n/i);
        // Not even half-closed while the body is read: Node's HTTP client destroys its socket at a FIN.
        if (endedAt !== 0) expect(endedAt - started, "the server's FIN").to.be.at.least(LINGER_MS - 200);
      } finally {
        clearInterval(trickle);
        socket.destroy();
      }
      const until = Date.now() + 1_000;
      while (t.server.connections() > 0 && Date.now() < until) await sleep(10);
      expect(t.server.connections()).to.equal(0);
    });
  }

  it("closes the connection of a client that sends more than the byte bound at once", async function () {
    t = await startTestServer();
    const socket = openChunkedRequest(t.server.port, "/api/v1/token/sell", "api_key: wrong-key-0000000000\r\n");
    let answer = "";
    socket.on("data", (d: Buffer) => (answer += d.toString("latin1")));
    const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now())));
    const chunk = `${(64 * 1024).toString(16)}\r\n${"x".repeat(64 * 1024)}\r\n`;
    const started = Date.now();
    let sent = 0;
    const flood = setInterval(() => {
      // As fast as the server takes it, well past the byte bound.
      while (!socket.destroyed && socket.writableLength < 256 * 1024 && sent < 8 * DISCARD_LIMIT_BYTES) {
        socket.write(chunk);
        sent += chunk.length;
      }
    }, 5);
    try {
      const at = await Promise.race([closed, sleep(LINGER_MS + 3_000).then(() => 0)]);
      expect(at, "the connection was not closed").to.not.equal(0);
      expect(at - started).to.be.lessThan(LINGER_MS);
      expect(answer).to.match(/^HTTP\/1\.1 401 /);
    } finally {
      clearInterval(flood);
      socket.destroy();
    }
  });

  it("keeps the connection for the next request once the whole body was read and dropped", async function () {
    t = await startTestServer();
    const socket = net.connect(t.server.port, "127.0.0.1");
    socket.on("error", () => {});
    let answer = "";
    socket.on("data", (d: Buffer) => (answer += d.toString("latin1")));
    const body = JSON.stringify(largeTrade());
    socket.write(
      `POST /tokentrade.v1.TokenService/Sell HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\napi_key: wrong-key-0000000000\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    await sleep(50); // the refusal goes out before the body comes
    socket.write(body);
    socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    const until = Date.now() + 3_000;
    while (!answer.includes('{"status":"ok"}') && Date.now() < until) await sleep(20);
    socket.destroy();
    expect(answer).to.match(/^HTTP\/1\.1 401 /);
    expect(answer).to.include('{"status":"ok"}');
  });

  it("closes a connection the client asked to close once the whole body was read and dropped, not before", async function () {
    t = await startTestServer();
    const socket = net.connect({ port: t.server.port, host: "127.0.0.1", allowHalfOpen: true });
    socket.on("error", () => {});
    let answer = "";
    socket.on("data", (d: Buffer) => (answer += d.toString("latin1")));
    const ended = new Promise<number>((resolve) => socket.once("end", () => resolve(Date.now())));
    const body = JSON.stringify(largeTrade());
    socket.write(
      `POST /api/v1/token/sell HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\napi_key: wrong-key-0000000000\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    // The body in pieces, 100 ms apart, once the answer has come.
    const pieces = 5;
    const size = Math.ceil(body.length / pieces);
    let lastSentAt = 0;
    for (let waited = 0; !/^HTTP\/1\.1 401 /.test(answer) && waited < 2_000; waited += 20) await sleep(20);
    expect(answer, "answered before the body came").to.match(/^HTTP\/1\.1 401 /);
    for (let i = 0; i < pieces; i++) {
      await sleep(100);
      socket.write(body.slice(i * size, (i + 1) * size));
      lastSentAt = Date.now();
    }
    const endedAt = await Promise.race([ended, sleep(2_000).then(() => 0)]);
    socket.destroy();
    expect(endedAt, "the server's FIN").to.not.equal(0);
    expect(endedAt).to.be.at.least(lastSentAt);
    expect(endedAt - lastSentAt).to.be.lessThan(1_500); // soon after the body's end, well before LINGER_MS (3 s)
    expect(answer).to.match(/\r\nconnection: close\r\n/i);
  });
});
