/**
 * The production build (`npm run build`, `npm run start:prod`): compiled JavaScript run by plain
 * node with the production dependencies only (test/helpers/production-build.ts builds it under
 * the temp directory, never in the checkout's dist/). What it holds, that it serves an existing
 * chain (anvil), and how it refuses: without RPC_URL, and on a Node.js that is too old.
 * The operator's whole path (deploy CLI, keystore, two endpoints) is real-network.anvil.test.ts.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import { MIN_NODE_VERSION, nodeVersionProblem, supportsNode } from "../../adapters/node-version.js";
import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../helpers/anvil.js";
import { productionApp, productionEntry } from "../helpers/production-build.js";

const API_KEY = "production-build-test-key-0123";
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A node on PATH, other than npm's node_modules/.bin one, too old to run the service; undefined if none. */
function olderNodeOnPath(): { binary: string; version: string } | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const binary = join(dir, "node");
    if (dir === "" || dir.includes("node_modules") || !existsSync(binary)) continue;
    const run = spawnSync(binary, ["-p", "process.versions.node"], { encoding: "utf8" });
    const version = run.stdout?.trim();
    if (run.status === 0 && version && nodeVersionProblem(version) !== undefined) return { binary, version };
  }
  return undefined;
}

describe("production build", function () {
  this.timeout(240_000);

  it("holds the production dependencies and none of the development ones", function () {
    const app = productionApp();
    const installed = (name: string) => existsSync(join(app, "node_modules", name, "package.json"));
    const resolvable = (name: string) => {
      try {
        createRequire(join(app, "scripts", "start.js")).resolve(name);
        return true;
      } catch {
        return false;
      }
    };
    for (const dev of ["tsx", "hardhat", "solc", "typescript", "@nomicfoundation/edr", "mocha"]) {
      expect(installed(dev) || resolvable(dev), dev).to.equal(false);
    }
    for (const prod of ["ethers", "pino", "pg", "zod", "@connectrpc/connect-node", "tiny-secp256k1"])
      expect(installed(prod), prod).to.equal(true);
    // Only the service: no tests, no Hardhat scripts.
    expect(existsSync(join(app, "test"))).to.equal(false);
    expect(existsSync(join(app, "scripts", "embedded-chain", "chain.js"))).to.equal(false);
    expect(existsSync(join(app, "scripts", "deploy.js"))).to.equal(false);
  });

  describe("on an existing chain (anvil)", function () {
    let anvil: Anvil;
    let dir: string;
    let service: ChildProcess | undefined;
    let out = "";

    before(async function () {
      anvil = await startAnvil();
      dir = mkdtempSync(join(tmpdir(), "production-build-"));
      const addresses = await deployOnAnvil(anvil, 1_000);
      writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    });

    after(async function () {
      if (service && service.exitCode === null) service.kill("SIGKILL");
      await anvil?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("starts with plain node (no --import), answers /healthz and the price, and stops on SIGTERM", async function () {
      const port = await freePort();
      const api = `http://127.0.0.1:${port}`;
      const [command, ...args] = productionEntry();
      service = spawn(command!, args, {
        cwd: productionApp(),
        env: {
          PATH: process.env.PATH ?? "",
          RPC_URL: anvil.url,
          DEPLOYMENT_FILE: join(dir, "deployment.json"),
          EXCHANGE_PRIVATE_KEYS: hardhatAccount(1).privateKey,
          API_KEYS: API_KEY,
          PORT: String(port),
          DATA_DIR: join(dir, "data"),
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      service.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      service.stderr!.on("data", (d: Buffer) => (out += d.toString()));
      const until = Date.now() + 60_000;
      for (;;) {
        if (service.exitCode !== null) throw new Error(`the service exited with ${service.exitCode}: ${out}`);
        if (
          await fetch(`${api}/healthz`).then(
            (r) => r.status === 200,
            () => false,
          )
        )
          break;
        if (Date.now() > until) throw new Error(`the service did not answer /healthz: ${out}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      const health = await fetch(`${api}/healthz`);
      expect(await health.json()).to.deep.equal({ status: "ok" });
      const price = await fetch(`${api}/api/v1/token/price`, { headers: { api_key: API_KEY } });
      const body = await price.text();
      expect(price.status, body).to.equal(200);
      expect(body).to.match(/\d/);
      expect((await fetch(`${api}/api/v1/token/price`)).status).to.equal(401);
      // Log lines are written within 200 ms (buffered).
      for (const until = Date.now() + 5_000; !out.includes("existing chain") && Date.now() < until; )
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(out).to.include("existing chain");

      service.kill("SIGTERM");
      expect(await new Promise((resolve) => service!.once("exit", resolve))).to.equal(0);
    });
  });

  it("refuses to start without RPC_URL, with one line saying what to do", function () {
    const [command, ...args] = productionEntry();
    const run = spawnSync(command!, args, {
      cwd: productionApp(),
      env: { PATH: process.env.PATH ?? "" },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status).to.equal(1);
    const lines = run.stderr.trim().split("\n");
    expect(lines, run.stderr).to.have.length(1);
    expect(lines[0]).to.match(
      /^Cannot start: RPC_URL is not set, and the embedded chain needs the development dependencies/,
    );
    expect(lines[0]).to.include("`npm install`, then `npm start`");
    expect(run.stderr).to.not.match(/ERR_MODULE_NOT_FOUND|ERR_UNKNOWN_BUILTIN_MODULE|at .*\.js:\d+/);
  });

  it("npm run start:prod says nothing about a .env when there is none", function () {
    // As `npm run build` leaves a checkout: package.json, and the build in dist/.
    const dir = mkdtempSync(join(tmpdir(), "start-prod-"));
    try {
      copyFileSync(join(ROOT, "package.json"), join(dir, "package.json"));
      symlinkSync(productionApp(), join(dir, "dist"));
      const run = spawnSync("npm", ["run", "start:prod", "--prefix", dir], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "" },
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(run.status, run.stderr).to.not.equal(0);
      expect(run.stderr).to.include("Cannot start: RPC_URL is not set");
      // Node's own line for --env-file-if-exists was ".env not found. Continuing without it."
      expect(run.stderr).to.not.match(/\.env(?!\.example)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("stops with one line on a Node.js too old for it (the first such node on PATH, if any)", function () {
    const older = olderNodeOnPath();
    if (older === undefined) this.skip();
    const run = spawnSync(older!.binary, [join(productionApp(), "scripts", "start.js")], {
      cwd: productionApp(),
      env: { PATH: process.env.PATH ?? "", RPC_URL: "http://127.0.0.1:1" },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status, run.stderr).to.equal(1);
    expect(run.stderr).to.equal(`${nodeVersionProblem(older!.version)}\n`);
    expect(run.stderr).to.include(`this is ${older!.version}`);
  });

  it("compares versions: the check's function", function () {
    // As a plain comparison against 20.19 (package.json `devEngines`, the install floor).
    for (const version of ["18.20.0", "20.18.9", "v16.0.0"])
      expect(supportsNode(version, "20.19.0"), version).to.equal(false);
    for (const version of ["20.19.0", "20.20.2", "22.1.0", "v24.0.0", "24.0.0-pre"])
      expect(supportsNode(version, "20.19.0"), version).to.equal(true);
    // What the service needs: node:sqlite with DatabaseSync#isTransaction (22.16+, 24+; not 23.x).
    expect(MIN_NODE_VERSION).to.equal("22.16.0");
    for (const version of ["18.20.0", "20.18.9", "20.19.0", "22.1.0", "22.15.1", "23.11.0"]) {
      expect(nodeVersionProblem(version), version).to.be.a("string").and.include(`this is ${version}`);
    }
    for (const version of ["22.16.0", "22.20.0", "24.0.0", "24.21.0", "25.1.0"])
      expect(nodeVersionProblem(version), version).to.equal(undefined);
    expect(nodeVersionProblem("18.20.0")).to.equal(
      "token-trading-service needs Node.js 22.16 or newer; this is 18.20.0",
    );
  });
});
