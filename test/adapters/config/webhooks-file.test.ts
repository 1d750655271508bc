import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { ConfigError, loadConfig } from "../../../adapters/config/env.js";

const API = "an-api-key-0123456789";
const ID = createHash("sha256").update(API).digest("hex").slice(0, 32);
const SECRET = `whsec_${randomBytes(32).toString("base64")}`;

describe("WEBHOOKS_FILE", function () {
  let dir: string;
  before(function () {
    dir = mkdtempSync(join(tmpdir(), "webhooks-config-"));
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  function load(endpoints: unknown, env: NodeJS.ProcessEnv = {}) {
    const file = join(dir, `${randomBytes(4).toString("hex")}.json`);
    writeFileSync(file, typeof endpoints === "string" ? endpoints : JSON.stringify({ endpoints }));
    return loadConfig({ API_KEYS: API, WEBHOOKS_FILE: file, ...env });
  }

  function problems(endpoints: unknown, env: NodeJS.ProcessEnv = {}): string[] {
    try {
      load(endpoints, env);
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError);
      return (error as ConfigError).problems;
    }
    throw new Error("expected a ConfigError");
  }

  it("reads each api key's endpoint, named by the key's id (its scope), with one or two secrets", function () {
    const next = `whsec_${randomBytes(24).toString("base64")}`;
    const config = load([{ apiKeyId: ID, url: "https://hooks.example.com/trades", secrets: [SECRET, next] }]);
    expect(config.webhooks.endpoints).to.have.length(1);
    expect(config.webhooks.endpoints[0]!.apiKeyId).to.equal(ID);
    expect(config.webhooks.endpoints[0]!.url.href).to.equal("https://hooks.example.com/trades");
    expect(config.webhooks.endpoints[0]!.secrets).to.have.length(2);
    expect(config.webhooks).to.include({ allowInsecure: false, allowPrivate: false, retryWindowMs: 86_400_000 });
    expect(JSON.stringify(config.webhooks)).not.to.include(SECRET.slice(6));
  });

  it("keeps delivered and failed events 30 days by default, or WEBHOOK_RETENTION_DAYS, naming a bad value", function () {
    expect(loadConfig({ API_KEYS: API }).webhooks.retentionMs).to.equal(30 * 86_400_000);
    expect(loadConfig({ API_KEYS: API, WEBHOOK_RETENTION_DAYS: "7" }).webhooks.retentionMs).to.equal(7 * 86_400_000);
    for (const bad of ["0", "1.5", "30d", "3651"]) {
      let thrown: unknown;
      try {
        loadConfig({ API_KEYS: API, WEBHOOK_RETENTION_DAYS: bad });
      } catch (error) {
        thrown = error;
      }
      expect((thrown as ConfigError).problems, bad).to.deep.equal([
        "WEBHOOK_RETENTION_DAYS: must be an integer from 1 to 3650",
      ]);
    }
  });

  it("has no endpoint without the variable", function () {
    expect(loadConfig({ API_KEYS: API }).webhooks.endpoints).to.deep.equal([]);
  });

  it("refuses http:// unless WEBHOOK_ALLOW_INSECURE=true", function () {
    const entry = [{ apiKeyId: ID, url: "http://hooks.example.com/", secrets: [SECRET] }];
    expect(problems(entry)).to.deep.equal([
      "WEBHOOKS_FILE: endpoints[0].url: must be https:// (http:// only with WEBHOOK_ALLOW_INSECURE=true)",
    ]);
    expect(load(entry, { WEBHOOK_ALLOW_INSECURE: "true" }).webhooks.endpoints).to.have.length(1);
  });

  it("refuses loopback, private and link-local addresses unless WEBHOOK_ALLOW_PRIVATE=true", function () {
    for (const host of [
      "127.0.0.1",
      "10.0.0.8",
      "192.168.1.1",
      "169.254.169.254",
      "[::1]",
      "[fe80::1]",
      "[::ffff:127.0.0.1]",
      // IPv4 inside IPv6: NAT64 (RFC 6052), 6to4 (RFC 3056), IPv4-compatible, and Teredo (RFC 4380)
      "[64:ff9b::a9fe:a9fe]",
      "[64:ff9b::10.0.0.1]",
      "[2002:7f00:1::]",
      "[2002:c0a8:101::1]",
      "[::127.0.0.1]",
      "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
    ]) {
      const entry = [{ apiKeyId: ID, url: `https://${host}/hook`, secrets: [SECRET] }];
      expect(problems(entry)[0], host).to.match(/loopback, private or link-local/);
      expect(load(entry, { WEBHOOK_ALLOW_PRIVATE: "true" }).webhooks.endpoints, host).to.have.length(1);
    }
  });

  it("takes public addresses, IPv4 inside IPv6 included", function () {
    for (const host of [
      "8.8.8.8",
      "[2606:4700::1111]",
      "[::ffff:8.8.8.8]",
      "[64:ff9b::808:808]",
      "[2002:808:808::1]",
    ]) {
      const entry = [{ apiKeyId: ID, url: `https://${host}/hook`, secrets: [SECRET] }];
      expect(load(entry).webhooks.endpoints, host).to.have.length(1);
    }
  });

  it("names every problem by entry, never echoing a secret", function () {
    const found = problems([
      { apiKeyId: API, url: "https://a.example.com", secrets: [SECRET] },
      { apiKeyId: "f".repeat(32), url: "https://a.example.com", secrets: [SECRET] },
      { apiKeyId: ID, url: "ftp://a.example.com", secrets: ["whsec_c2hvcnQ=", "sk_live_123", SECRET] },
      { apiKeyId: ID, url: "https://user:pw@a.example.com", secrets: [`${SECRET.slice(0, -4)}!!!!`] },
    ]);
    expect(found).to.deep.equal([
      "WEBHOOKS_FILE: endpoints[0].apiKeyId: must be an api key's id, the first 32 hex digits (lower-case) of its SHA-256",
      `WEBHOOKS_FILE: endpoints[1].apiKeyId: ${"f".repeat(32)} is the id of none of the configured api keys (API_KEYS, API_KEYS_FILE or ACCESS_FILE)`,
      "WEBHOOKS_FILE: endpoints[2].url: must be an https:// URL",
      "WEBHOOKS_FILE: endpoints[2].secrets: must list one or two secrets (two during a rotation)",
      "WEBHOOKS_FILE: endpoints[3].url: must not hold a user name or password",
      "WEBHOOKS_FILE: endpoints[3].secrets[0]: must be whsec_ followed by base64",
    ]);
    expect(found.join("\n")).not.to.include(SECRET.slice(6, 20));
    expect(problems([{ apiKeyId: ID, url: "https://a.example.com", secrets: ["whsec_c2hvcnQ="] }])).to.deep.equal([
      "WEBHOOKS_FILE: endpoints[0].secrets[0]: must hold 24 to 64 bytes",
    ]);
    expect(problems("{not json")).to.deep.equal(["WEBHOOKS_FILE: is not valid JSON"]);
    expect(
      problems([
        { apiKeyId: ID, url: "https://a.example.com", secrets: [SECRET] },
        { apiKeyId: ID, url: "https://b.example.com", secrets: [SECRET] },
      ]),
    ).to.deep.equal([
      "WEBHOOKS_FILE: endpoints[1].apiKeyId: names the same api key as an earlier entry (one endpoint per key)",
    ]);
    expect(problems([], { WEBHOOK_ALLOW_PRIVATE: "yes" })).to.deep.equal([
      "WEBHOOK_ALLOW_PRIVATE: must be true or false",
    ]);
  });
});
