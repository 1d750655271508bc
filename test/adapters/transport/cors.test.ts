/**
 * CORS (adapters/transport/http/steps/cors.ts): off by default, as before; with CORS_ORIGINS, preflights
 * of the JSON routes, Connect and gRPC-Web from an allowed origin are answered and every answer
 * to that origin exposes what gRPC-Web clients read. The browser's own view is in
 * test/browser/.
 */
import * as http2 from "node:http2";

import { expect } from "chai";

import { loadConfig } from "../../../adapters/config/env.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { API_KEY, startTestServer, type TestServer } from "./helpers.js";

const APP = "https://app.example.com";
const SELL_RPC = `/${TokenService.typeName}/Sell`;

function preflight(url: string, origin: string, requestHeaders = "api_key, content-type") {
  return fetch(url, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": requestHeaders },
  });
}

describe("CORS", function () {
  let t: TestServer;
  afterEach(async function () {
    await t?.close();
  });

  it("is off without CORS_ORIGINS: a preflight gets 405, answers carry no CORS headers", async function () {
    t = await startTestServer();
    const answer = await preflight(`${t.url}/api/v1/token/sell`, APP);
    expect(answer.status).to.equal(405);
    const price = await fetch(`${t.url}/api/v1/token/price`, { headers: { api_key: API_KEY, origin: APP } });
    expect(price.headers.get("access-control-allow-origin")).to.equal(null);
  });

  describe("with CORS_ORIGINS", function () {
    beforeEach(async function () {
      t = await startTestServer({ corsOrigins: [APP, "http://localhost:5173"] });
    });

    for (const path of [
      "/api/v1/token/sell",
      "/api/v1/remmitance",
      "/api/v1/token/price",
      SELL_RPC,
      "/grpc.health.v1.Health/Check",
    ]) {
      it(`answers a preflight for ${path} from an allowed origin with 204 and what the protocols need`, async function () {
        const answer = await preflight(
          `${t.url}${path}`,
          APP,
          "api_key, content-type, idempotency-key, connect-protocol-version, x-grpc-web, x-user-agent",
        );
        expect(answer.status).to.equal(204);
        expect(answer.headers.get("access-control-allow-origin")).to.equal(APP);
        expect(answer.headers.get("vary")).to.match(/origin/i);
        expect(answer.headers.get("access-control-allow-methods")).to.include("POST").and.include("GET");
        const allowed = answer.headers.get("access-control-allow-headers")!.split(", ");
        for (const header of [
          "api_key",
          "content-type",
          "idempotency-key",
          "connect-protocol-version",
          "connect-timeout-ms",
          "x-grpc-web",
          "x-user-agent",
          "grpc-timeout",
        ]) {
          expect(allowed, header).to.include(header);
        }
        expect(answer.headers.get("access-control-allow-credentials")).to.equal(null);
        expect(Number(answer.headers.get("access-control-max-age"))).to.be.greaterThan(0);
      });
    }

    it("refuses a preflight from another origin with 403 naming it, and gives its answers no CORS headers", async function () {
      const answer = await preflight(`${t.url}/api/v1/token/sell`, "https://evil.example");
      expect(answer.status).to.equal(403);
      expect(await answer.json()).to.deep.equal({
        code: "permission_denied",
        message: "Origin: https://evil.example is not allowed (CORS_ORIGINS)",
      });
      const price = await fetch(`${t.url}/api/v1/token/price`, {
        headers: { api_key: API_KEY, origin: "https://evil.example" },
      });
      expect(price.status).to.equal(200);
      expect(price.headers.get("access-control-allow-origin")).to.equal(null);
    });

    it("allows the origin on answers, errors included, and exposes grpc-status, grpc-message and x-request-id", async function () {
      const price = await fetch(`${t.url}/api/v1/token/price`, { headers: { api_key: API_KEY, origin: APP } });
      expect(price.headers.get("access-control-allow-origin")).to.equal(APP);
      const exposed = price.headers.get("access-control-expose-headers")!.split(", ");
      for (const header of ["grpc-status", "grpc-message", "grpc-status-details-bin", "x-request-id", "retry-after"])
        expect(exposed, header).to.include(header);
      const refused = await fetch(`${t.url}/api/v1/token/price`, { headers: { origin: APP } });
      expect(refused.status).to.equal(401);
      expect(refused.headers.get("access-control-allow-origin")).to.equal(APP);
      // gRPC-Web refused for its key: the trailers-only answer carries them too.
      const web = await fetch(`${t.url}${SELL_RPC}`, {
        method: "POST",
        headers: { origin: APP, "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
        body: new Uint8Array(5),
      });
      expect(web.headers.get("grpc-status")).to.equal("16");
      expect(web.headers.get("access-control-allow-origin")).to.equal(APP);
    });

    it("puts them on an HTTP/2 trailers-only answer too", async function () {
      const session = http2.connect(t.url);
      const stream = session.request({
        ":method": "POST",
        ":path": SELL_RPC,
        "content-type": "application/grpc-web+proto",
        origin: APP,
      });
      stream.end(Buffer.alloc(5));
      const headers = await new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once("response", resolve));
      stream.resume();
      session.close();
      expect(headers["grpc-status"]).to.equal("16");
      expect(headers["access-control-allow-origin"]).to.equal(APP);
      expect(headers["x-request-id"]).to.be.a("string");
    });
  });

  it("reads CORS_ORIGINS, and names it when an entry is not an origin", function () {
    expect(loadConfig({}).corsOrigins).to.deep.equal([]);
    expect(loadConfig({ CORS_ORIGINS: " https://a.example , http://localhost:5173 " }).corsOrigins).to.deep.equal([
      "https://a.example",
      "http://localhost:5173",
    ]);
    expect(loadConfig({ CORS_ORIGINS: "*" }).corsOrigins).to.deep.equal(["*"]);
    for (const bad of ["https://a.example/path", "a.example", "ftp://a.example", "https://a.example,"]) {
      expect(() => loadConfig({ CORS_ORIGINS: bad }), bad).to.throw(/CORS_ORIGINS: must be/);
    }
  });
});
