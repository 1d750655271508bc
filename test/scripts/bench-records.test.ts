import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface Answers {
  signature: string;
  signed: { rawTx: string; txHash: string };
  calldata: string;
  blockNumber: unknown;
  batch: unknown[];
  bodies: string[];
}

/** test/helpers/records-ab-child.ts, loaded as the records bench loads its service (with its hooks). */
function runChild(hooks: boolean): { off: Answers; on: Answers; counted: Record<string, number> } {
  const output = execFileSync(
    process.execPath,
    [
      "--import",
      "tsx",
      ...(hooks ? ["--import", "./scripts/bench-records/register.ts"] : []),
      "test/helpers/records-ab-child.ts",
    ],
    { cwd: ROOT, encoding: "utf8" },
  );
  return JSON.parse(output);
}

describe("the records bench's A/B switches (npm run bench -- --only records)", function () {
  this.timeout(60_000);
  let run: ReturnType<typeof runChild>;
  before(function () {
    run = runChild(true);
  });

  it("load in place of the four replacements, and count what each does", function () {
    // One round of answers each way: a signature and a signing (which signs once more), two encodings... each.
    expect(run.counted).to.include({ "0001 sign": 4, "0002 sign": 2, "0003 encode": 2 });
    expect(run.counted["0004 calls"]).to.equal(6);
  });

  it("run the library when on: ethers' JsonRpcProvider writes the calls it sends", function () {
    // ethers' payloads start with the method; RpcProvider's with the jsonrpc field.
    expect(run.off.bodies.length).to.be.greaterThan(0);
    for (const body of run.off.bodies) expect(body).to.match(/^\[?\{"jsonrpc":"2\.0"/);
    expect(run.on.bodies.length).to.be.greaterThan(0);
    for (const body of run.on.bodies) expect(body).to.match(/^\[?\{"method":/);
  });

  it("answer the same either way: signatures, signed transactions, calldata, results and errors", function () {
    const { bodies: _off, ...off } = run.off;
    const { bodies: _on, ...on } = run.on;
    expect(on).to.deep.equal(off);
    expect(off.blockNumber).to.equal("0x2a");
    expect(off.batch).to.deep.equal([{ result: "0x2a" }, { error: "CALL_EXCEPTION" }]);
  });

  it("leave the service's modules alone without the bench's hooks", function () {
    const plain = runChild(false);
    expect(plain.counted).to.deep.equal({});
    for (const body of plain.on.bodies) expect(body).to.match(/^\[?\{"jsonrpc":"2\.0"/);
  });
});

interface TransportRun {
  grpc: { off: unknown; on: unknown };
  scrapes: { ours: string; library: string | null };
  pinoLines: number;
  counted: Record<string, number>;
  /** The service logger's lines on the child's stdout. */
  lines: Array<Record<string, unknown>>;
}

/** test/helpers/records-ab-transport-child.ts, loaded as the records bench loads its service (with its hooks). */
function runTransportChild(hooks: boolean): TransportRun {
  const output = execFileSync(
    process.execPath,
    [
      "--import",
      "tsx",
      ...(hooks ? ["--import", "./scripts/bench-records/register.ts"] : []),
      "test/helpers/records-ab-transport-child.ts",
    ],
    { cwd: ROOT, encoding: "utf8" },
  );
  const lines = output
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const result = lines.find((line) => "counted" in line) as unknown as Omit<TransportRun, "lines">;
  return { ...result, lines: lines.filter((line) => !("counted" in line)) };
}

describe("the transport records' A/B switches (npm run bench -- --only records --records transport)", function () {
  this.timeout(60_000);
  let run: TransportRun;
  before(function () {
    run = runTransportChild(true);
  });

  it("load in place of the three replacements, and count what each does", function () {
    // 0007: the GetPrice with the switch off only; 0008: one access line each way; 0009: four
    // observations each way, and the test server's two GetPrice answers.
    expect(run.counted).to.include({ "0007 lean": 1, "0008 line": 2, "0009 observe": 10 });
  });

  it("run the library when on: Connect answers GetPrice as the lean path does", function () {
    expect(run.grpc.on).to.deep.equal(run.grpc.off);
    expect((run.grpc.off as { trailers: Record<string, string> }).trailers["grpc-status"]).to.equal("0");
  });

  it("run the library when on: prom-client's Counter and Histogram report what RequestMetrics reports", function () {
    expect(run.scrapes.library).to.equal(run.scrapes.ours);
    // Two of the four observations each way are this series': ours has only the first four.
    expect(run.scrapes.ours).to.include('t_requests_total{route="/api/v1/token/price",protocol="http",code="200"} 2');
  });

  it("run the library when on: pino's destination writes the lines, the access line as LogBuffer's", function () {
    expect(run.pinoLines).to.equal(2);
    const access = run.lines.filter((line) => line.msg === "request completed").map(({ time: _, ...rest }) => rest);
    expect(access).to.have.length(2);
    expect(access[1]).to.deep.equal(access[0]);
    expect(run.lines.filter((line) => line.msg === "another line").map((line) => line.side)).to.have.members([
      "off",
      "on",
    ]);
  });

  it("leave the service's modules alone without the bench's hooks", function () {
    const plain = runTransportChild(false);
    expect(plain.counted).to.deep.equal({});
    expect(plain.scrapes.library).to.equal(null);
    expect(plain.pinoLines).to.equal(0);
    expect(plain.scrapes.ours).to.include('t_requests_total{route="/api/v1/token/price",protocol="http",code="200"} 4');
  });
});
