/**
 * The PKCS#11 signer when the token stops answering (a network HSM gone quiet, a request its
 * vendor's library waits for forever): SoftHSM behind the tests' shim (test/helpers/pkcs11-shim.ts),
 * which holds a call for as long as a test says. The service's process must go on (its event loop,
 * its libuv pool: files, DNS), every signature is answered within SIGNER_TIMEOUT_MS, the token is
 * usable again once it answers, and the shutdown with a call still in the token is clean.
 */
import { spawnSync } from "node:child_process";
import { lookup } from "node:dns/promises";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { getBytes, randomBytes, recoverAddress } from "ethers";

import { openPkcs11Signers, type OpenedSigners, type TransactionSigner } from "../../../adapters/chain/index.js";
import { pkcs11Shim, type Shim } from "../../helpers/pkcs11-shim.js";
import { softHsmToken, type TestToken } from "../../helpers/softhsm.js";

const CLOSE_CHILD = fileURLToPath(new URL("../../helpers/pkcs11-close-child.ts", import.meta.url));

const digest = () => getBytes(randomBytes(32));
/** "done" when `work` settles within `ms`, else "stalled". */
const within = (ms: number, work: Promise<unknown>) =>
  Promise.race([
    work.then(
      () => "done",
      () => "done",
    ),
    new Promise<string>((resolve) => setTimeout(() => resolve("stalled"), ms)),
  ]);

describe("PKCS#11 signer: a token that stops answering", function () {
  this.timeout(60_000);
  let token: TestToken;
  let key: { label: string; address: string };
  let shim: Shim;
  let opened: OpenedSigners | undefined;

  before(async function () {
    token = await softHsmToken(`quiet-${process.pid}`);
    key = await token.newKey("wallet");
  });
  afterEach(async function () {
    shim?.remove();
    await opened?.close();
    opened = undefined;
  });

  const open = async (sessions: number, timeoutMs: number): Promise<TransactionSigner> => {
    opened = await openPkcs11Signers({
      module: shim.module,
      token: { label: token.label },
      pin: token.pin,
      keys: [{ label: key.label }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [key.address],
      sessions,
      timeoutMs,
    });
    return opened.signers[0]!;
  };

  it("answers unavailable within SIGNER_TIMEOUT_MS while C_Sign hangs, and the process keeps reading files and resolving names", async function () {
    // At most 5 s, so that on a signer inside this process the held threads come back.
    shim = pkcs11Shim(this, token, { maxHoldMs: 5_000 });
    // npm start's default SIGNER_CONCURRENCY=4: as many sessions as libuv has pool threads.
    const signer = await open(4, 1_000);
    const first = digest();
    expect(recoverAddress(first, await signer.signDigest(first))).to.equal(key.address);
    shim.hold("C_Sign");
    const started = performance.now();
    const hung = await Promise.allSettled([1, 2, 3, 4].map(() => signer.signDigest(digest())));
    const took = performance.now() - started;
    expect(hung.map((r) => r.status)).to.deep.equal(["rejected", "rejected", "rejected", "rejected"]);
    expect(String((hung[0] as PromiseRejectedResult).reason)).to.include("cannot sign");
    expect(took, "answered by SIGNER_TIMEOUT_MS (1000 ms), with room for a loaded machine").to.be.below(2_500);
    // The token still holds the four calls: the process's own work goes on.
    const read = await within(1_000, readFile(fileURLToPath(import.meta.url)));
    const resolved = await within(1_000, lookup("localhost"));
    shim.release("C_Sign");
    expect({ read, resolved }, "fs.readFile and dns.lookup while the token hangs").to.deep.equal({
      read: "done",
      resolved: "done",
    });
  });

  it("keeps the event loop running while C_SignInit does not return", async function () {
    shim = pkcs11Shim(this, token, { maxHoldMs: 3_000 });
    const signer = await open(4, 500);
    await signer.signDigest(digest());
    shim.hold("C_SignInit");
    let last = performance.now();
    let worst = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 10);
    const started = performance.now();
    const outcome = await signer.signDigest(digest()).then(
      () => "signed",
      (error: Error) => error.message,
    );
    const took = performance.now() - started;
    clearInterval(tick);
    shim.release("C_SignInit");
    expect(outcome).to.include("cannot sign");
    expect(worst, "the longest the event loop waited (ms)").to.be.below(250);
    expect(took, "SIGNER_TIMEOUT_MS=500 holds").to.be.below(1_500);
  });

  it("signs again once the token answers new calls, though the calls it lost never return", async function () {
    // A network HSM that dropped the requests in flight: they never come back, new ones are answered.
    shim = pkcs11Shim(this, token, { lost: true, maxHoldMs: 20_000 });
    // Long enough for a new process of the signer's to start on this shared machine.
    const signer = await open(2, 3_000);
    await signer.signDigest(digest());
    shim.hold("C_Sign");
    const lost = await Promise.allSettled([1, 2].map(() => signer.signDigest(digest())));
    expect(lost.map((r) => r.status)).to.deep.equal(["rejected", "rejected"]);
    shim.release("C_Sign");
    const answers: string[] = [];
    for (let i = 0; i < 4; i++) {
      const d = digest();
      answers.push(
        await signer.signDigest(d).then(
          (signature) => recoverAddress(d, signature),
          (error: Error) => error.message,
        ),
      );
    }
    expect(answers, "signatures once the token answers again").to.deep.equal([
      key.address,
      key.address,
      key.address,
      key.address,
    ]);
  });

  it("never uses one session from two threads, through a burst, a re-open and timeouts", async function () {
    shim = pkcs11Shim(this, token, { maxHoldMs: 5_000 });
    const signer = await open(3, 1_000);
    const burst = () => Promise.allSettled(Array.from({ length: 24 }, () => signer.signDigest(digest())));
    shim.next("close-all");
    const first = await burst();
    expect(
      first.every((r) => r.status === "fulfilled"),
      "signed through the re-open",
    ).to.equal(true);
    shim.hold("C_Sign");
    const second = burst();
    await new Promise((resolve) => setTimeout(resolve, 300));
    shim.release("C_Sign");
    await second;
    expect(shim.violations(), "sessions used by two threads at once").to.equal("");
  });

  it("shuts down cleanly with a signature still in the token", async function () {
    shim = pkcs11Shim(this, token, { maxHoldMs: 5_000 });
    shim.hold("C_Sign");
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", CLOSE_CHILD, shim.module, token.label, token.pin, key.label, key.address],
      { env: { ...process.env, SOFTHSM2_CONF: token.conf }, encoding: "utf8", timeout: 30_000 },
    );
    shim.release("C_Sign");
    expect({ status: run.status, signal: run.signal, stdout: run.stdout }, run.stderr).to.deep.equal({
      status: 0,
      signal: null,
      stdout: "signature: refused\nclosed\nexited cleanly\n",
    });
  });
});
