/**
 * What `npm install` is told in package.json: the Node.js the code runs on (`engines`), the one
 * `npm install` and the npm scripts need (`devEngines`), and which dependencies may run install
 * scripts (`allowScripts`, npm 11): every one is decided, and install-time telemetry is denied.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import { MIN_NODE_VERSION } from "../../adapters/node-version.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface PackageJson {
  engines?: { node?: string };
  devEngines?: { runtime?: { name?: string; version?: string; onFail?: string } };
  allowScripts?: Record<string, boolean>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

const pkg = (): PackageJson => JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as PackageJson;

describe("package.json for npm install", function () {
  this.timeout(60_000);

  it("names in engines the Node.js the service runs on: 22.16 or later 22.x, or 24 and later (never 23.x)", function () {
    // adapters/node-version.ts: node:sqlite's DatabaseSync#isTransaction, in 22.16 and 24.0, never in 23.x.
    expect(MIN_NODE_VERSION).to.equal("22.16.0");
    expect(pkg().engines).to.deep.equal({ node: "^22.16.0 || >=24" });
    // The lock file repeats the root's engines.
    const lock = JSON.parse(readFileSync(`${ROOT}/package-lock.json`, "utf8")) as {
      packages: Record<string, { engines?: unknown }>;
    };
    expect(lock.packages[""]?.engines).to.deep.equal({ node: "^22.16.0 || >=24" });
  });

  it("names in devEngines the Node.js npm install needs: 20.19 and later, since it brings Node 24 for the scripts", function () {
    expect(pkg().devEngines).to.deep.equal({ runtime: { name: "node", version: ">=20.19", onFail: "error" } });
  });

  it("denies @scarf/scarf's install-time telemetry and leaves no install script undecided", function () {
    expect(pkg().allowScripts?.["@scarf/scarf"]).to.equal(false);
    // The Node 24 binary (the `node` devDependency) is installed by its preinstall.
    expect(pkg().allowScripts?.node).to.equal(true);
    const run = spawnSync("npm", ["install-scripts", "ls"], { cwd: ROOT, encoding: "utf8" });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout.trim()).to.equal("No packages with unreviewed install scripts.");
  });

  it("keeps pkcs11js optional, since it compiles at install on every host, with its install script allowed", function () {
    // A host without a C++ compiler still installs; SIGNER=pkcs11 there says what to install.
    expect(pkg().optionalDependencies?.pkcs11js).to.be.a("string");
    expect(pkg().dependencies).to.not.have.property("pkcs11js");
    expect(pkg().allowScripts?.pkcs11js).to.equal(true);
    const lock = JSON.parse(readFileSync(`${ROOT}/package-lock.json`, "utf8")) as {
      packages: Record<string, { optional?: boolean }>;
    };
    expect(lock.packages["node_modules/pkcs11js"]?.optional).to.equal(true);
  });
});
