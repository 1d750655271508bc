/**
 * The production build (`npm run build`, `npm run start:prod`): compiled JavaScript with the
 * production dependencies only. The full path, a trade against a real node with a keystore,
 * is in real-network.anvil.test.ts; here, what it holds and how it refuses.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

import { expect } from "chai";

import { supportsNode } from "../../adapters/node-version.js";
import { productionApp, productionEntry } from "../helpers/production-build.js";

describe("production build", function () {
  this.timeout(180_000);

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
    for (const prod of ["ethers", "pino", "pg", "zod", "@connectrpc/connect-node", "tiny-secp256k1"]) expect(installed(prod), prod).to.equal(true);
  });

  it("refuses to start without RPC_URL, with one line saying what to do", function () {
    const [command, ...args] = productionEntry();
    const run = spawnSync(command!, args, { cwd: productionApp(), env: { PATH: process.env["PATH"] ?? "" }, encoding: "utf8", timeout: 60_000 });
    expect(run.status).to.equal(1);
    expect(run.stderr).to.include("RPC_URL: is required by the production build");
    expect(run.stderr).to.not.match(/ERR_MODULE_NOT_FOUND|at .*\.js:\d+/);
  });

  it("starts only on Node.js 20.19 or newer", function () {
    for (const version of ["18.20.0", "20.18.9", "v16.0.0"]) expect(supportsNode(version), version).to.equal(false);
    for (const version of ["20.19.0", "20.20.2", "22.1.0", "v24.0.0"]) expect(supportsNode(version), version).to.equal(true);
  });
});
