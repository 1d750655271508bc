/**
 * The start and stop records' digest of the configuration (adapters/startup/audit.ts): every
 * setting but the secrets. A change of a secret alone leaves it as it was; a change of a setting
 * changes it; and no secret is in what it covers.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { loadConfig } from "../../../adapters/config/env.js";
import { configDigest, publicConfig, serviceVersion } from "../../../adapters/startup/audit.js";

describe("the configuration's digest in the audit log's start and stop records", function () {
  let dir: string;
  before(function () {
    dir = mkdtempSync(join(tmpdir(), "audit-config-"));
    writeFileSync(join(dir, "deployment.json"), "{}");
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  const env = (secrets: { apiKey: string; privateKey: string; password: string; rpcKey: string }, port = "8080") => ({
    RPC_URL: `https://user:${secrets.password}@rpc.example.org/v3/${secrets.rpcKey}?token=${secrets.rpcKey}`,
    DEPLOYMENT_FILE: join(dir, "deployment.json"),
    EXCHANGE_PRIVATE_KEYS: secrets.privateKey,
    API_KEYS: secrets.apiKey,
    JOURNAL_URL: `postgres://service:${secrets.password}@db.internal:5432/journal?password=${secrets.password}`,
    PORT: port,
  });
  const one = {
    apiKey: "first-api-key-0123456789abcdef",
    privateKey: `0x${"1".repeat(64)}`,
    password: "hunter2-first",
    rpcKey: "rpc-key-first-0123",
  };
  const two = {
    apiKey: "second-api-key-0123456789abcde",
    privateKey: `0x${"2".repeat(64)}`,
    password: "hunter2-second",
    rpcKey: "rpc-key-second-456",
  };

  it("is the same when only secrets change, and changes with a setting", function () {
    const first = configDigest(loadConfig(env(one)));
    expect(first).to.match(/^[0-9a-f]{64}$/);
    expect(configDigest(loadConfig(env(two)))).to.equal(first);
    expect(configDigest(loadConfig(env(one, "8081")))).to.not.equal(first);
  });

  it("covers no secret: keys counted, URLs cut to scheme, host and port", function () {
    const text = JSON.stringify(publicConfig(loadConfig(env(one))));
    for (const secret of Object.values(one)) expect(text).to.not.include(secret);
    expect(text).to.include('"rpcUrl":"https://rpc.example.org"').and.include('"url":"postgres://db.internal:5432"');
    expect(text).to.include('"apiKeys":1').and.include('"privateKeys":1');
  });

  it("names this service's version, package.json's", function () {
    expect(serviceVersion()).to.match(/^\d+\.\d+\.\d+/);
  });
});
