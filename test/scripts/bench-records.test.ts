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
