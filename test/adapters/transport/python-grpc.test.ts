/**
 * Python's grpcio against the service, with stubs generated the usual way:
 *   python -m grpc_tools.protoc -I proto --python_out=OUT --grpc_python_out=OUT proto/tokentrade/v1/token.proto
 * The proto's package was `token.v1` in a `token/` folder, which Python's standard-library
 * `token` module shadowed (`No module named 'token.v1'; 'token' is not a package`); it is
 * `tokentrade.v1` now. grpcio and grpcio-tools come from pip, in a virtual environment kept
 * under the temp directory between runs. Skipped only where there is no python3.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { expect } from "chai";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import { API_KEY, CUSTOMER, DAI, PRICE, WALLET, startTestServer, type TestServer } from "./helpers.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const VENV = join(tmpdir(), "token-service-python-grpc");
const PYTHON = join(VENV, "bin", "python");

const CLIENT = `
import json, sys
import token as stdlib_token  # the standard library's: no longer shadowed by the stubs' folder
import grpc
from tokentrade.v1 import token_pb2, token_pb2_grpc
assert hasattr(stdlib_token, "NAME")

target, key, wallet, customer, dai = sys.argv[1:6]
stub = token_pb2_grpc.TokenServiceStub(grpc.insecure_channel(target))
metadata = [("api_key", key)]
price = stub.GetPrice(token_pb2.GetPriceRequest(), metadata=metadata)
sell = stub.Sell(token_pb2.TradeRequest(user_address=wallet, destinatary=customer, amount="1", usd_address=dai), metadata=metadata)
try:
    stub.GetPrice(token_pb2.GetPriceRequest(), metadata=[("api_key", "not-the-key-0123456789")])
    refused = "none"
except grpc.RpcError as error:
    refused = error.code().name
print(json.dumps({"rates": dict(price.rate_for_cash_currency), "status": sell.status, "events": len(sell.events), "refused": refused}))
`;

/** Quote, then Sell naming the quote in metadata twice: the second is ALREADY_EXISTS. */
const QUOTE_CLIENT = `
import json, sys
import grpc
from tokentrade.v1 import token_pb2, token_pb2_grpc

target, key, wallet, customer, dai = sys.argv[1:6]
stub = token_pb2_grpc.TokenServiceStub(grpc.insecure_channel(target))
metadata = [("api_key", key)]
quote = stub.Quote(token_pb2.QuoteRequest(kind="sell", amount="2", usd_address=dai, slippage_bps=100), metadata=metadata)
trade = token_pb2.TradeRequest(user_address=wallet, destinatary=customer, amount="2", usd_address=dai)
sell = stub.Sell(trade, metadata=metadata + [("quote-id", quote.quote_id)])
try:
    stub.Sell(trade, metadata=metadata + [("quote-id", quote.quote_id)])
    again = "none"
except grpc.RpcError as error:
    again = error.code().name
print(json.dumps({"expected": quote.expected_out.base_units, "min": quote.min_out.base_units,
                  "has_destinatary": quote.HasField("destinatary"), "status": sell.status, "again": again}))
`;

function python3(): string | undefined {
  const found = spawnSync("python3", ["--version"], { encoding: "utf8" });
  return found.status === 0 ? "python3" : undefined;
}

describe("Python grpcio, with stubs generated the usual way", function () {
  this.timeout(900_000);
  let t: TestServer;
  let out: string;

  before(function () {
    if (python3() === undefined) this.skip();
    const ready = existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import grpc, grpc_tools"]).status === 0;
    if (!ready) {
      rmSync(VENV, { recursive: true, force: true });
      execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
      const pip = spawnSync(PYTHON, ["-m", "pip", "install", "--quiet", "grpcio", "grpcio-tools"], {
        encoding: "utf8",
        timeout: 600_000,
      });
      if (pip.status !== 0) throw new Error(`pip could not install grpcio and grpcio-tools: ${pip.stderr}`);
    }
    out = mkdtempSync(join(tmpdir(), "python-stubs-"));
  });

  beforeEach(async function () {
    t = await startTestServer();
  });
  afterEach(async function () {
    await t?.close();
  });
  after(function () {
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it("generates importable stubs and calls GetPrice and Sell with the api_key; a wrong key is UNAUTHENTICATED", async function () {
    const generated = spawnSync(
      PYTHON,
      [
        "-m",
        "grpc_tools.protoc",
        "-I",
        "proto",
        `--python_out=${out}`,
        `--grpc_python_out=${out}`,
        "proto/tokentrade/v1/token.proto",
      ],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    expect(generated.status, generated.stderr).to.equal(0);
    expect(existsSync(join(out, "tokentrade", "v1", "token_pb2_grpc.py"))).to.equal(true);
    writeFileSync(join(out, "client.py"), CLIENT);
    // The script's own directory is on Python's path, as when a user runs it beside the stubs.
    // Run asynchronously: the server answering it lives in this process.
    const run = await promisify(execFile)(
      PYTHON,
      [join(out, "client.py"), new URL(t.url).host, API_KEY, WALLET, CUSTOMER, DAI.address],
      { encoding: "utf8", timeout: 60_000 },
    );
    const result = JSON.parse(run.stdout) as {
      rates: Record<string, number>;
      status: boolean;
      events: number;
      refused: string;
    };
    expect(result.rates).to.deep.equal(PRICE.rateForCashCurrency);
    expect(result.status).to.equal(true);
    expect(result.events).to.equal(5);
    expect(result.refused).to.equal("UNAUTHENTICATED");
    expect(t.trade.calls).to.have.length(1);
  });

  it("calls Quote, then Sell naming the quote in quote-id metadata: once, then ALREADY_EXISTS", async function () {
    const server = await startTestServer({ journal: new MemoryJournal() });
    try {
      const generated = spawnSync(
        PYTHON,
        [
          "-m",
          "grpc_tools.protoc",
          "-I",
          "proto",
          `--python_out=${out}`,
          `--grpc_python_out=${out}`,
          "proto/tokentrade/v1/token.proto",
        ],
        { cwd: ROOT, encoding: "utf8" },
      );
      expect(generated.status, generated.stderr).to.equal(0);
      writeFileSync(join(out, "quote_client.py"), QUOTE_CLIENT);
      const run = await promisify(execFile)(
        PYTHON,
        [join(out, "quote_client.py"), new URL(server.url).host, API_KEY, WALLET, CUSTOMER, DAI.address],
        { encoding: "utf8", timeout: 60_000 },
      );
      expect(JSON.parse(run.stdout)).to.deep.equal({
        expected: "2500000000000000000", // 2 tokens at 1.25 USD, in DAI's 18 decimals
        min: "2475000000000000000",
        has_destinatary: false,
        status: true,
        again: "ALREADY_EXISTS",
      });
      expect(server.trade.nonce).to.equal(1);
    } finally {
      await server.close();
    }
  });
});
