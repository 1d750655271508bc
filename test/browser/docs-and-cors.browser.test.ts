/**
 * In a real browser: Debian's chromium, driven by playwright-core (which never downloads a
 * browser; scripts/ensure-chromium.sh installs Debian's when it is missing).
 * - /docs loads Swagger UI with no request leaving the service's origin, and shows the four
 *   operations of the SPEC;
 * - a page on another origin calls the JSON routes, Connect and gRPC-Web with CORS_ORIGINS
 *   allowing it, and is refused by the browser when it does not.
 */
import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { chromium, type Browser } from "playwright-core";

import { TokenService } from "../../gen/tokentrade/v1/token_pb.js";
import { API_KEY, startTestServer, type TestServer } from "../adapters/transport/helpers.js";

const ENSURE = fileURLToPath(new URL("../../scripts/ensure-chromium.sh", import.meta.url));

/** A page server on its own origin (another port is another origin). */
async function pageOrigin(): Promise<{ url: string; server: Server }> {
  const server = createServer((_req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>app</title>"),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe("in a real browser (chromium)", function () {
  this.timeout(900_000);
  let browser: Browser;

  before(async function () {
    let executablePath: string;
    try {
      executablePath = execFileSync("sh", [ENSURE], {
        encoding: "utf8",
        timeout: 600_000,
        stdio: ["ignore", "pipe", "pipe"],
      }).trim();
    } catch (error) {
      // Without root (a developer's machine without chromium) the browser tests are skipped; in CI they must run.
      if (process.getuid?.() !== 0 && process.env.CI === undefined) this.skip();
      throw new Error(
        `chromium could not be installed: ${(error as { stderr?: string }).stderr ?? (error as Error).message}`,
      );
    }
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  });
  after(async function () {
    await browser?.close();
  });

  describe("/docs", function () {
    let t: TestServer;
    before(async function () {
      t = await startTestServer();
    });
    after(async function () {
      await t?.close();
    });

    it("loads with no request leaving the service's origin and shows the four operations", async function () {
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on("request", (request) => requests.push(request.url()));
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(error.message));
      // A request the page's CSP blocks never shows as a request: its console error does.
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(message.text());
      });
      const answer = await page.goto(`${t.url}/docs`);
      expect(answer?.status()).to.equal(200);
      expect(answer?.headers()["content-security-policy"]).to.include("default-src 'self'");
      for (const operation of [
        "/api/v1/token/sell",
        "/api/v1/token/buy",
        "/api/v1/remmitance",
        "/api/v1/token/price",
      ]) {
        await page.getByText(operation, { exact: true }).first().waitFor({ timeout: 30_000 });
      }
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator, not a DOM node; the rendered text is what is asserted.
      const text = await page.locator("#ui").innerText();
      expect(text).to.include("Token trading service");
      const origins = new Set(requests.map((url) => new URL(url).origin));
      expect([...origins].filter((origin) => origin !== "null" && origin !== new URL(t.url).origin)).to.deep.equal([]);
      expect(requests).to.include(`${t.url}/api/v1/openapi.json`);
      expect(errors).to.deep.equal([]);
      await page.close();
    });
  });

  describe("CORS", function () {
    let t: TestServer;
    let app: { url: string; server: Server };
    before(async function () {
      app = await pageOrigin();
      t = await startTestServer({ corsOrigins: [app.url] });
    });
    after(async function () {
      await t?.close();
      app?.server.close();
    });

    /** Runs fetch calls from a page on `origin` against the service; what each answered, or the browser's refusal. */
    async function fromPage(origin: string) {
      const page = await browser.newPage();
      await page.goto(origin);
      // A plain-text script: functions compiled by tsx carry helpers the page does not have.
      const script = `(async ({ api, key, rpc }) => {
        const attempt = async (run) => {
          try {
            const answer = await run();
            return { status: answer.status, grpcStatus: answer.headers.get("grpc-status"), requestId: answer.headers.get("x-request-id"), body: await answer.text() };
          } catch (error) {
            return { refused: String(error) };
          }
        };
        return {
          json: await attempt(() => fetch(api + "/api/v1/token/price", { headers: { api_key: key } })),
          sell: await attempt(() => fetch(api + "/api/v1/token/sell", { method: "POST", headers: { api_key: key, "content-type": "application/json", "idempotency-key": "browser-1" }, body: "{}" })),
          connect: await attempt(() => fetch(api + rpc, { method: "POST", headers: { api_key: key, "content-type": "application/json", "connect-protocol-version": "1" }, body: "{}" })),
          grpcWeb: await attempt(() => fetch(api + rpc, { method: "POST", headers: { api_key: "wrong-key-0123456789", "content-type": "application/grpc-web+proto", "x-grpc-web": "1" }, body: new Uint8Array(5) })),
        };
      })(${JSON.stringify({ api: t.url, key: API_KEY, rpc: `/${TokenService.typeName}/GetPrice` })})`;
      type Call = {
        status?: number;
        grpcStatus?: string | null;
        requestId?: string | null;
        body?: string;
        refused?: string;
      };
      const result = (await page.evaluate(script)) as { json: Call; sell: Call; connect: Call; grpcWeb: Call };
      await page.close();
      return result;
    }

    it("lets a page on an allowed origin call the JSON routes, Connect and gRPC-Web, and read grpc-status and the request id", async function () {
      const result = await fromPage(app.url);
      expect(result.json).to.deep.include({ status: 200 });
      expect(result.json.requestId).to.be.a("string");
      expect(result.sell).to.deep.include({ status: 400 }); // reached the route: {} names a missing field
      expect(result.sell.body).to.include("invalid_argument");
      expect(result.connect).to.deep.include({ status: 200 });
      expect(result.grpcWeb).to.deep.include({ status: 200, grpcStatus: "16" });
    });

    it("is refused by the browser on an origin the service does not allow", async function () {
      const other = await pageOrigin();
      try {
        const result = await fromPage(other.url);
        for (const call of [result.json, result.sell, result.connect, result.grpcWeb])
          expect(call)
            .to.have.property("refused")
            .that.match(/Failed to fetch/);
      } finally {
        other.server.close();
      }
    });
  });
});
