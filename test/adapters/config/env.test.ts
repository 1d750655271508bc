import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseEnv } from "node:util";

import { expect } from "chai";

import { readDeploymentFile } from "../../../adapters/config/deployment-file.js";
import { ConfigError, loadConfig } from "../../../adapters/config/env.js";

const KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const API = "an-api-key-0123456789";

/** Asserts that loading fails and that one problem starts with `name`. */
function problem(env: NodeJS.ProcessEnv, name: string): string {
  let thrown: unknown;
  try {
    loadConfig(env);
  } catch (error) {
    thrown = error;
  }
  expect(thrown, `expected a ConfigError for ${name}`).to.be.instanceOf(ConfigError);
  const found = (thrown as ConfigError).problems.find((p) => p.startsWith(`${name}:`));
  expect(found, (thrown as ConfigError).message).to.be.a("string");
  return found!;
}

describe("configuration from the environment", function () {
  let dir: string;
  before(function () {
    dir = mkdtempSync(join(tmpdir(), "config-"));
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  it("has working defaults for the embedded chain", function () {
    const config = loadConfig({});
    expect(config).to.deep.include({
      host: "127.0.0.1",
      port: 8080,
      logLevel: "info",
      apiKeys: [],
      bodyLimitBytes: 16_384,
      shutdownTimeoutMs: 30_000,
    });
    expect(config.chain).to.deep.equal({ mode: "embedded", chainPort: 8545 });
    expect(config.limits).to.deep.equal({
      maxSellTokens: 100_000n * 10n ** 18n,
      maxUsd: "100000",
      minSellTokens: 10n ** 16n,
      minUsd: "0.01",
    });
    expect(config.tls).to.equal(undefined);
    expect(config.cashDiscountBps).to.equal(undefined);
  });

  it("reads every variable", function () {
    const config = loadConfig({
      HOST: "0.0.0.0",
      PORT: "9000",
      CHAIN_PORT: "9545",
      LOG_LEVEL: "debug",
      API_KEYS: ` ${API} , second-key-0123456789 `,
      MAX_SELL_TOKENS: "12.5",
      MAX_USD: "500",
      MIN_SELL_TOKENS: "0.5",
      MIN_USD: "2",
      CASH_DISCOUNT_BPS: "250",
      BODY_LIMIT_BYTES: "4096",
      SHUTDOWN_TIMEOUT_MS: "1000",
    });
    expect(config).to.deep.include({
      host: "0.0.0.0",
      port: 9000,
      logLevel: "debug",
      bodyLimitBytes: 4096,
      shutdownTimeoutMs: 1000,
      cashDiscountBps: 250,
    });
    expect(config.apiKeys).to.deep.equal([API, "second-key-0123456789"]);
    expect(config.chain).to.deep.equal({ mode: "embedded", chainPort: 9545 });
    expect(config.limits).to.deep.equal({
      maxSellTokens: 125n * 10n ** 17n,
      maxUsd: "500",
      minSellTokens: 5n * 10n ** 17n,
      minUsd: "2",
    });
  });

  it("refuses a minimum trade size above the maximum, naming it", function () {
    expect(problem({ MIN_SELL_TOKENS: "12.6", MAX_SELL_TOKENS: "12.5" }, "MIN_SELL_TOKENS")).to.match(
      /not be more than MAX_SELL_TOKENS/,
    );
    expect(problem({ MIN_USD: "500.000000000000000000000001", MAX_USD: "500" }, "MIN_USD")).to.match(
      /not be more than MAX_USD/,
    );
    expect(loadConfig({ MIN_USD: "500", MAX_USD: "500" }).limits.minUsd).to.equal("500");
  });

  it("treats empty variables as unset (as .env.example leaves them)", function () {
    const config = loadConfig({ PORT: "", API_KEYS: "", RPC_URL: "", TLS_CERT: "", CASH_DISCOUNT_BPS: "" });
    expect(config.port).to.equal(8080);
    expect(config.chain.mode).to.equal("embedded");
  });

  it("names each bad variable", function () {
    expect(problem({ PORT: "80a" }, "PORT")).to.include("integer");
    expect(problem({ PORT: "70000" }, "PORT")).to.include("65535");
    expect(problem({ CHAIN_PORT: "-1" }, "CHAIN_PORT")).to.include("integer");
    expect(problem({ LOG_LEVEL: "verbose" }, "LOG_LEVEL")).to.include("info");
    expect(problem({ MAX_USD: "1e6" }, "MAX_USD")).to.include("decimal");
    expect(problem({ MAX_SELL_TOKENS: "0" }, "MAX_SELL_TOKENS")).to.include("greater than 0");
    expect(problem({ CASH_DISCOUNT_BPS: "10000" }, "CASH_DISCOUNT_BPS")).to.include("9999");
    expect(problem({ BODY_LIMIT_BYTES: "10" }, "BODY_LIMIT_BYTES")).to.include("1024");
    expect(problem({ HOST: "a host" }, "HOST")).to.include("host");
    expect(problem({ RPC_URL: "ftp://x" }, "RPC_URL")).to.include("http");
    expect(problem({ QUOTE_TTL_MS: "4999" }, "QUOTE_TTL_MS")).to.include("5000 to 600000");
    expect(problem({ QUOTE_TTL_MS: "30s" }, "QUOTE_TTL_MS")).to.include("integer");
  });

  it("keeps a quote 30 s by default, or QUOTE_TTL_MS", function () {
    expect(loadConfig({}).quoteTtlMs).to.equal(30_000);
    expect(loadConfig({ QUOTE_TTL_MS: "5000" }).quoteTtlMs).to.equal(5_000);
  });

  describe("the trade lifecycle", function () {
    it("has the documented defaults", function () {
      const config = loadConfig({});
      expect(config.trade).to.deep.equal({
        lifetimeS: 300,
        slippageBps: 100,
        feeCap: 100n * 10n ** 9n,
        confirmations: 1,
        reorgDepth: 64,
        resubmitAfterMs: 30_000,
        intervalMs: 1_000,
        leaseMs: 15_000,
      });
      expect(config.stuckAfterMs).to.equal(600_000);
    });

    it("reads each setting, the fee cap in exact gwei", function () {
      const config = loadConfig({
        TRADE_LIFETIME_S: "120",
        SLIPPAGE_BPS: "25",
        MAX_FEE_PER_GAS_GWEI: "0.000000001",
        CONFIRMATIONS: "3",
        REORG_DEPTH: "12",
        RESUBMIT_AFTER_MS: "12000",
        MONITOR_INTERVAL_MS: "500",
        MONITOR_LEASE_MS: "5000",
        STUCK_AFTER_MS: "60000",
      });
      expect(config.trade).to.deep.equal({
        lifetimeS: 120,
        slippageBps: 25,
        feeCap: 1n,
        confirmations: 3,
        reorgDepth: 12,
        resubmitAfterMs: 12_000,
        intervalMs: 500,
        leaseMs: 5_000,
      });
      expect(config.stuckAfterMs).to.equal(60_000);
      expect(loadConfig({ MAX_FEE_PER_GAS_GWEI: "12.5" }).trade.feeCap).to.equal(12_500_000_000n);
    });

    it("names each bad setting", function () {
      expect(problem({ TRADE_LIFETIME_S: "5" }, "TRADE_LIFETIME_S")).to.match(/from 10 to 86400/);
      expect(problem({ SLIPPAGE_BPS: "-1" }, "SLIPPAGE_BPS")).to.match(/from 0 to 5000/);
      expect(problem({ MAX_FEE_PER_GAS_GWEI: "1e3" }, "MAX_FEE_PER_GAS_GWEI")).to.match(/plain decimal number of gwei/);
      expect(problem({ MAX_FEE_PER_GAS_GWEI: "1.0000000001" }, "MAX_FEE_PER_GAS_GWEI")).to.match(/at most 9 decimals/);
      expect(problem({ MAX_FEE_PER_GAS_GWEI: "0" }, "MAX_FEE_PER_GAS_GWEI")).to.match(/greater than 0/);
      expect(problem({ CONFIRMATIONS: "0" }, "CONFIRMATIONS")).to.match(/from 1 to 1000/);
      expect(problem({ CONFIRMATIONS: "20", REORG_DEPTH: "10" }, "REORG_DEPTH")).to.match(/at least CONFIRMATIONS/);
      expect(problem({ RESUBMIT_AFTER_MS: "10" }, "RESUBMIT_AFTER_MS")).to.match(/from 1000 to 3600000/);
      expect(problem({ MONITOR_INTERVAL_MS: "1000", MONITOR_LEASE_MS: "2000" }, "MONITOR_LEASE_MS")).to.match(
        /at least 3 × MONITOR_INTERVAL_MS/,
      );
      expect(problem({ STUCK_AFTER_MS: "x" }, "STUCK_AFTER_MS")).to.match(/integer/);
    });

    it("refuses REORG_DEPTH not above CONFIRMATIONS, naming both: a confirmed trade must still be watched for reorgs", function () {
      for (const env of [
        { CONFIRMATIONS: "5", REORG_DEPTH: "5" },
        { CONFIRMATIONS: "64" }, // REORG_DEPTH's default is 64
        { CONFIRMATIONS: "12", REORG_DEPTH: "3" },
      ]) {
        const message = problem(env, "REORG_DEPTH");
        expect(message).to.include("CONFIRMATIONS");
        expect(message).to.include(`REORG_DEPTH=${env.REORG_DEPTH ?? "64"}`);
        expect(message).to.include(`CONFIRMATIONS=${env.CONFIRMATIONS}`);
      }
      expect(loadConfig({ CONFIRMATIONS: "63" }).trade).to.deep.include({ confirmations: 63, reorgDepth: 64 });
      expect(loadConfig({ CONFIRMATIONS: "5", REORG_DEPTH: "6" }).trade).to.deep.include({
        confirmations: 5,
        reorgDepth: 6,
      });
    });
  });

  it("lists every problem at once", function () {
    let thrown: ConfigError | undefined;
    try {
      loadConfig({ PORT: "x", LOG_LEVEL: "y" });
    } catch (error) {
      thrown = error as ConfigError;
    }
    expect(thrown?.problems.map((p) => p.split(":")[0])).to.have.members(["PORT", "LOG_LEVEL"]);
  });

  describe("API keys", function () {
    it("refuses short keys and keys with spaces, without echoing them", function () {
      const message = problem({ API_KEYS: "short" }, "API_KEYS");
      expect(message).to.include("16");
      expect(message).not.to.include("short,");
      expect(problem({ API_KEYS: "has a space in the key" }, "API_KEYS")).to.include("spaces");
      expect(problem({ API_KEYS: " , " }, "API_KEYS")).to.include("no key");
    });

    it("reads API_KEYS_FILE, one key per line with comments, together with API_KEYS", function () {
      const file = join(dir, "keys.txt");
      writeFileSync(file, `# service keys\nfile-key-0123456789abc\n\n  other-file-key-0123456789  \n`);
      const config = loadConfig({ API_KEYS_FILE: file, API_KEYS: API });
      expect(config.apiKeys).to.deep.equal([API, "file-key-0123456789abc", "other-file-key-0123456789"]);
    });

    it("names API_KEYS_FILE when it cannot be read or holds no key", function () {
      expect(problem({ API_KEYS_FILE: join(dir, "missing.txt") }, "API_KEYS_FILE")).to.include("ENOENT");
      const empty = join(dir, "empty.txt");
      writeFileSync(empty, "# nothing\n");
      expect(problem({ API_KEYS_FILE: empty }, "API_KEYS_FILE")).to.include("no key");
    });
  });

  describe("TLS", function () {
    it("needs both TLS_CERT and TLS_KEY", function () {
      expect(problem({ TLS_CERT: "cert.pem" }, "TLS_KEY")).to.include("required");
      expect(problem({ TLS_KEY: "key.pem" }, "TLS_CERT")).to.include("required");
    });

    it("reads both files", function () {
      writeFileSync(join(dir, "c.pem"), "CERT");
      writeFileSync(join(dir, "k.pem"), "KEY");
      const config = loadConfig({ TLS_CERT: join(dir, "c.pem"), TLS_KEY: join(dir, "k.pem") });
      expect(config.tls?.cert.toString()).to.equal("CERT");
      expect(config.tls?.key.toString()).to.equal("KEY");
      expect(problem({ TLS_CERT: join(dir, "c.pem"), TLS_KEY: join(dir, "nope.pem") }, "TLS_KEY")).to.include("ENOENT");
    });
  });

  describe("production mode (RPC_URL set)", function () {
    const complete = {
      RPC_URL: "https://rpc.example.com/v3/abc",
      DEPLOYMENT_FILE: "deployment.json",
      EXCHANGE_PRIVATE_KEYS: KEY,
      API_KEYS: API,
    };

    it("accepts a complete configuration", function () {
      const config = loadConfig(complete);
      expect(config.chain).to.deep.equal({
        mode: "rpc",
        rpcUrl: complete.RPC_URL,
        rpcUrls: [complete.RPC_URL],
        rpcTimeoutMs: 10_000,
        rpcBatchSize: 100,
        deploymentFile: "deployment.json",
        privateKeys: [KEY],
      });
    });

    it("takes RPC_BATCH_SIZE, the most calls in one JSON-RPC request (hosted providers cap it at 10 to 100)", function () {
      expect(loadConfig({ ...complete, RPC_BATCH_SIZE: "10" }).chain).to.deep.include({ rpcBatchSize: 10 });
      expect(loadConfig({ ...complete, RPC_BATCH_SIZE: "1" }).chain).to.deep.include({ rpcBatchSize: 1 });
      for (const bad of ["0", "-5", "ten", "1.5", "1001"]) {
        expect(problem({ ...complete, RPC_BATCH_SIZE: bad }, "RPC_BATCH_SIZE"), bad).to.equal(
          "RPC_BATCH_SIZE: must be an integer from 1 to 1000",
        );
      }
      expect(readFileSync(new URL("../../../.env.example", import.meta.url), "utf8")).to.match(/^RPC_BATCH_SIZE=$/m);
    });

    it("names each missing piece", function () {
      for (const [name, reported] of [
        ["DEPLOYMENT_FILE", "DEPLOYMENT_FILE"],
        ["EXCHANGE_PRIVATE_KEYS", "EXCHANGE_KEYSTORE"],
        ["API_KEYS", "API_KEYS"],
      ] as const) {
        const env: NodeJS.ProcessEnv = { ...complete };
        delete env[name];
        expect(problem(env, reported)).to.include("required when RPC_URL is set");
      }
    });

    it("takes several comma-separated RPC endpoints, in order, and refuses a bad or repeated one", function () {
      const config = loadConfig({
        ...complete,
        RPC_URL: " https://a.example/v3/k , http://127.0.0.1:8545",
        RPC_TIMEOUT_MS: "2500",
      });
      expect(config.chain).to.deep.include({
        rpcUrl: "https://a.example/v3/k",
        rpcUrls: ["https://a.example/v3/k", "http://127.0.0.1:8545"],
        rpcTimeoutMs: 2_500,
      });
      expect(problem({ ...complete, RPC_URL: "https://a.example,ftp://b.example" }, "RPC_URL")).to.include(
        "separated by commas",
      );
      // A WebSocket endpoint: calls over one connection, and heads pushed (eth_subscribe newHeads).
      expect(loadConfig({ ...complete, RPC_URL: "wss://a.example/ws/v3/k,ws://127.0.0.1:8545" }).chain).to.deep.include(
        {
          rpcUrls: ["wss://a.example/ws/v3/k", "ws://127.0.0.1:8545"],
        },
      );
      expect(problem({ ...complete, RPC_URL: "https://a.example,," }, "RPC_URL")).to.include("separated by commas");
      expect(problem({ ...complete, RPC_URL: "https://a.example,https://a.example" }, "RPC_URL")).to.include("twice");
    });

    describe("keystore", function () {
      const keystore = { ...complete, EXCHANGE_PRIVATE_KEYS: undefined };
      let keystoreFile: string;
      let passwordFile: string;
      before(function () {
        keystoreFile = join(dir, "wallet.json");
        passwordFile = join(dir, "password.txt");
        writeFileSync(keystoreFile, '{"version":3}');
        writeFileSync(passwordFile, "s3cret password\n");
      });

      it("reads the keystores and the password (without its last line break) at start", function () {
        const config = loadConfig({
          ...keystore,
          EXCHANGE_KEYSTORE: `${keystoreFile},${keystoreFile}`,
          EXCHANGE_KEYSTORE_PASSWORD_FILE: passwordFile,
        });
        expect(config.chain.mode === "rpc" && config.chain.keystore).to.deep.equal({
          files: [
            { path: keystoreFile, json: '{"version":3}' },
            { path: keystoreFile, json: '{"version":3}' },
          ],
          password: "s3cret password",
        });
        expect(config.chain.mode === "rpc" && config.chain.privateKeys).to.deep.equal([]);
      });

      it("needs the password file, and a file that exists, naming the variable and never the password", function () {
        expect(problem({ ...keystore, EXCHANGE_KEYSTORE: keystoreFile }, "EXCHANGE_KEYSTORE_PASSWORD_FILE")).to.include(
          "required",
        );
        expect(
          problem(
            {
              ...keystore,
              EXCHANGE_KEYSTORE: join(dir, "missing.json"),
              EXCHANGE_KEYSTORE_PASSWORD_FILE: passwordFile,
            },
            "EXCHANGE_KEYSTORE",
          ),
        ).to.include("ENOENT");
        const empty = join(dir, "empty.txt");
        writeFileSync(empty, "\n");
        expect(
          problem(
            { ...keystore, EXCHANGE_KEYSTORE: keystoreFile, EXCHANGE_KEYSTORE_PASSWORD_FILE: empty },
            "EXCHANGE_KEYSTORE_PASSWORD_FILE",
          ),
        ).to.include("empty");
      });

      it("refuses a keystore and raw keys together", function () {
        expect(
          problem(
            { ...complete, EXCHANGE_KEYSTORE: keystoreFile, EXCHANGE_KEYSTORE_PASSWORD_FILE: passwordFile },
            "EXCHANGE_KEYSTORE",
          ),
        ).to.include("not both");
      });

      it("refuses the keystore without RPC_URL", function () {
        expect(problem({ EXCHANGE_KEYSTORE: keystoreFile }, "EXCHANGE_KEYSTORE")).to.include("RPC_URL");
      });
    });

    it("refuses a malformed private key without echoing it", function () {
      const bad = `${KEY.slice(0, -1)}z`;
      const message = problem({ ...complete, EXCHANGE_PRIVATE_KEYS: `${KEY},${bad}` }, "EXCHANGE_PRIVATE_KEYS");
      expect(message).to.include("64 hex digits");
      expect(message).not.to.include(bad.slice(2, 20));
    });

    it("refuses chain settings without RPC_URL rather than ignore them", function () {
      expect(problem({ EXCHANGE_PRIVATE_KEYS: KEY }, "EXCHANGE_PRIVATE_KEYS")).to.include("RPC_URL");
      expect(problem({ DEPLOYMENT_FILE: "d.json" }, "DEPLOYMENT_FILE")).to.include("RPC_URL");
      expect(problem({ NATIVE_USD_FEED: "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419" }, "NATIVE_USD_FEED")).to.include(
        "RPC_URL",
      );
    });

    it("reads NATIVE_USD_FEED, the native coin's USD feed, when set, and refuses one that is no address", function () {
      const feed = "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419";
      const chain = loadConfig({ ...complete, NATIVE_USD_FEED: feed }).chain;
      expect(chain).to.deep.include({ mode: "rpc", nativeUsdFeed: feed });
      expect(loadConfig(complete).chain).to.not.have.property("nativeUsdFeed");
      expect(problem({ ...complete, NATIVE_USD_FEED: "0x5f4e" }, "NATIVE_USD_FEED")).to.include(
        "0x followed by 40 hex digits",
      );
    });
  });

  describe("SIGNER: the keys in an HSM or KMS", function () {
    const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    const rpc = { RPC_URL: "https://rpc.example.com/v3/abc", DEPLOYMENT_FILE: "deployment.json", API_KEYS: API };
    const pinFile = () => {
      const file = join(dir, "pin");
      writeFileSync(file, "1234-secret\n");
      return file;
    };

    it("reads SIGNER=pkcs11 with the PIN from its file (its line break dropped), and needs no other key", function () {
      const file = pinFile();
      const config = loadConfig({
        ...rpc,
        SIGNER: "pkcs11",
        PKCS11_MODULE: "/usr/lib/softhsm/libsofthsm2.so",
        PKCS11_TOKEN_LABEL: "hsm1",
        PKCS11_PIN_FILE: file,
        PKCS11_KEY_LABELS: "exchange-1",
        EXCHANGE_ADDRESSES: WALLET,
      });
      expect(config.chain.signer).to.deep.equal({
        kind: "pkcs11",
        module: "/usr/lib/softhsm/libsofthsm2.so",
        token: { label: "hsm1" },
        pin: "1234-secret",
        pinFile: file,
        keys: [{ label: "exchange-1" }],
        keyVariable: "PKCS11_KEY_LABELS",
        addresses: [WALLET],
        sessions: 4,
        timeoutMs: 5_000,
      });
    });

    it("reads SIGNER=aws-kms, on the embedded chain too", function () {
      const config = loadConfig({
        SIGNER: "aws-kms",
        KMS_KEY_IDS: "alias/a, alias/b",
        EXCHANGE_ADDRESSES: `${WALLET},${WALLET}`,
      });
      expect(config.chain.mode).to.equal("embedded");
      expect(config.chain.signer).to.deep.include({ kind: "aws-kms", keyIds: ["alias/a", "alias/b"], concurrency: 4 });
    });

    it("names each missing or misplaced setting, and never echoes the PIN", function () {
      expect(problem({ ...rpc, SIGNER: "pkcs11" }, "PKCS11_MODULE")).to.include("libsofthsm2.so");
      expect(problem({ ...rpc, SIGNER: "pkcs11" }, "PKCS11_PIN_FILE")).to.include("required");
      expect(problem({ ...rpc, SIGNER: "pkcs11" }, "PKCS11_KEY_LABELS")).to.include("PKCS11_KEY_IDS");
      expect(problem({ ...rpc, SIGNER: "pkcs11" }, "EXCHANGE_ADDRESSES")).to.include("required");
      expect(
        problem({ ...rpc, SIGNER: "pkcs11", PKCS11_TOKEN_LABEL: "a", PKCS11_SLOT: "1" }, "PKCS11_TOKEN_LABEL"),
      ).to.include("exactly one");
      expect(problem({ ...rpc, SIGNER: "aws-kms", EXCHANGE_ADDRESSES: WALLET }, "KMS_KEY_IDS")).to.include("required");
      expect(problem({ ...rpc, SIGNER: "aws-kms", EXCHANGE_PRIVATE_KEYS: KEY }, "EXCHANGE_PRIVATE_KEYS")).to.include(
        "in the signer",
      );
      expect(problem({ ...rpc, EXCHANGE_PRIVATE_KEYS: KEY, KMS_KEY_IDS: "k" }, "KMS_KEY_IDS")).to.include(
        "only used with SIGNER",
      );
      expect(problem({ SIGNER: "vault" }, "SIGNER")).to.include("pkcs11");
      expect(
        problem({ SIGNER: "aws-kms", KMS_KEY_IDS: "k", EXCHANGE_ADDRESSES: "0x12" }, "EXCHANGE_ADDRESSES"),
      ).to.include("40 hex");
      const missing = problem(
        { ...rpc, SIGNER: "pkcs11", PKCS11_PIN_FILE: join(dir, "no-such-pin") },
        "PKCS11_PIN_FILE",
      );
      expect(missing).to.include("ENOENT");
    });

    it("reads PKCS11_SLOT in decimal, or in hex as pkcs11-tool prints it (0x…)", function () {
      const slotOf = (PKCS11_SLOT: string) => {
        const config = loadConfig({
          ...rpc,
          SIGNER: "pkcs11",
          PKCS11_MODULE: "/usr/lib/softhsm/libsofthsm2.so",
          PKCS11_SLOT,
          PKCS11_PIN_FILE: pinFile(),
          PKCS11_KEY_IDS: "01",
          EXCHANGE_ADDRESSES: WALLET,
        });
        return config.chain.signer?.kind === "pkcs11" ? config.chain.signer.token : undefined;
      };
      expect(slotOf("244036324")).to.deep.equal({ slot: 244036324 });
      expect(slotOf("0xe8bb2e4")).to.deep.equal({ slot: 244036324 });
      expect(slotOf("0XE8BB2E4")).to.deep.equal({ slot: 244036324 });
      for (const wrong of ["0x", "0xg1", "-1", "1.5", "0x20000000000000"])
        expect(
          problem({ ...rpc, SIGNER: "pkcs11", PKCS11_SLOT: wrong }, "PKCS11_SLOT"),
          `PKCS11_SLOT=${wrong}`,
        ).to.include("decimal or hex (0x…)");
    });

    it("lists every signer variable in .env.example", function () {
      const example = parseEnv(readFileSync(new URL("../../../.env.example", import.meta.url), "utf8"));
      for (const name of [
        "SIGNER",
        "EXCHANGE_ADDRESSES",
        "SIGNER_TIMEOUT_MS",
        "SIGNER_CONCURRENCY",
        "PKCS11_MODULE",
        "PKCS11_TOKEN_LABEL",
        "PKCS11_SLOT",
        "PKCS11_PIN_FILE",
        "PKCS11_KEY_LABELS",
        "PKCS11_KEY_IDS",
        "KMS_KEY_IDS",
      ])
        expect(example, name).to.have.property(name);
    });
  });

  describe("price feeds", function () {
    it("defaults: the FX feeds may be 96 h old (a weekend and margin), the token feed the swap's own maximum, no bounds, no sequencer", function () {
      expect(loadConfig({}).feedPolicy).to.deep.equal({
        tokenUsd: {},
        eurUsd: { maxAgeS: 345_600 },
        chfUsd: { maxAgeS: 345_600 },
        nativeUsd: { maxAgeS: 90_000 },
      });
    });

    it("reads each feed's maximum age and bounds, and the sequencer uptime feed with its grace period", function () {
      const sequencer = "0xFdb631F5EE196F0ed6FAa767959853A9F217697D";
      const config = loadConfig({
        FEED_MAX_AGE_TOKEN_USD_S: "3600",
        FEED_MAX_AGE_EUR_USD_S: "90000",
        FEED_MAX_AGE_CHF_USD_S: "100000",
        FEED_BOUNDS_TOKEN_USD: "0.01-100",
        FEED_BOUNDS_EUR_USD: " 0.8 - 1.6 ",
        FEED_BOUNDS_CHF_USD: "0.9-1.5",
        FEED_MAX_AGE_NATIVE_USD_S: "3600",
        FEED_BOUNDS_NATIVE_USD: "100-100000",
        SEQUENCER_UPTIME_FEED: sequencer,
      });
      expect(config.feedPolicy).to.deep.equal({
        tokenUsd: { maxAgeS: 3600, bounds: { min: "0.01", max: "100" } },
        eurUsd: { maxAgeS: 90_000, bounds: { min: "0.8", max: "1.6" } },
        chfUsd: { maxAgeS: 100_000, bounds: { min: "0.9", max: "1.5" } },
        nativeUsd: { maxAgeS: 3600, bounds: { min: "100", max: "100000" } },
        sequencer: { address: sequencer, graceS: 3600 },
      });
      expect(
        loadConfig({ SEQUENCER_UPTIME_FEED: sequencer, SEQUENCER_GRACE_S: "600" }).feedPolicy.sequencer,
      ).to.deep.equal({ address: sequencer, graceS: 600 });
    });

    it("loads .env.example as written, which lists every one of them", function () {
      const example = parseEnv(readFileSync(new URL("../../../.env.example", import.meta.url), "utf8"));
      for (const name of [
        "FEED_MAX_AGE_TOKEN_USD_S",
        "FEED_MAX_AGE_EUR_USD_S",
        "FEED_MAX_AGE_CHF_USD_S",
        "FEED_BOUNDS_TOKEN_USD",
        "FEED_BOUNDS_EUR_USD",
        "FEED_BOUNDS_CHF_USD",
        "FEED_MAX_AGE_NATIVE_USD_S",
        "FEED_BOUNDS_NATIVE_USD",
        "NATIVE_USD_FEED",
        "SEQUENCER_UPTIME_FEED",
        "SEQUENCER_GRACE_S",
      ]) {
        expect(example, name).to.have.property(name);
      }
      expect(loadConfig(example).feedPolicy).to.deep.equal(loadConfig({}).feedPolicy);
    });

    it("names the variable of a bad value", function () {
      expect(problem({ FEED_MAX_AGE_EUR_USD_S: "0" }, "FEED_MAX_AGE_EUR_USD_S")).to.include(
        "integer from 1 to 2592000",
      );
      expect(problem({ FEED_MAX_AGE_TOKEN_USD_S: "1h" }, "FEED_MAX_AGE_TOKEN_USD_S")).to.include("integer");
      expect(problem({ FEED_BOUNDS_EUR_USD: "1.6" }, "FEED_BOUNDS_EUR_USD")).to.include('"min-max"');
      expect(problem({ FEED_BOUNDS_CHF_USD: "-1-2" }, "FEED_BOUNDS_CHF_USD")).to.include('"min-max"');
      expect(problem({ FEED_BOUNDS_TOKEN_USD: "2-1.5" }, "FEED_BOUNDS_TOKEN_USD")).to.include("less than max");
      expect(problem({ FEED_BOUNDS_TOKEN_USD: "1.5-1.50" }, "FEED_BOUNDS_TOKEN_USD")).to.include("less than max");
      expect(problem({ FEED_BOUNDS_TOKEN_USD: "0-1" }, "FEED_BOUNDS_TOKEN_USD")).to.include("greater than 0");
      expect(problem({ SEQUENCER_UPTIME_FEED: "0x1234" }, "SEQUENCER_UPTIME_FEED")).to.include("40 hex digits");
      expect(problem({ SEQUENCER_GRACE_S: "60" }, "SEQUENCER_GRACE_S")).to.include(
        "only used with SEQUENCER_UPTIME_FEED",
      );
    });
  });

  describe("TRUSTED_PROXIES", function () {
    it("trusts no proxy by default, and reads addresses and CIDRs, IPv4 and IPv6", function () {
      expect(loadConfig({}).trustedProxies).to.deep.equal([]);
      expect(
        loadConfig({ TRUSTED_PROXIES: " 10.0.0.0/8, 192.168.1.7 ,fd00::/8,::1, 2001:DB8::1/128,172.16.0.1/32" })
          .trustedProxies,
      ).to.deep.equal(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1", "2001:db8::1/128", "172.16.0.1/32"]);
    });

    it("loads .env.example as written, which lists it", function () {
      const example = parseEnv(readFileSync(new URL("../../../.env.example", import.meta.url), "utf8"));
      expect(example).to.have.property("TRUSTED_PROXIES");
      expect(loadConfig(example).trustedProxies).to.deep.equal([]);
    });

    it("names TRUSTED_PROXIES and the entry that is neither an address nor a CIDR", function () {
      for (const [value, entry] of [
        ["10.0.0.0/33", "10.0.0.0/33"],
        ["fd00::/129", "fd00::/129"],
        ["10.0.0.1, nginx", "nginx"],
        ["10.0.0.256", "10.0.0.256"],
        ["10.0.0.0/", "10.0.0.0/"],
        ["10.0.0.0/8/8", "10.0.0.0/8/8"],
        ["10.0.0.0/ 8", "10.0.0.0/ 8"],
        ["10.0.0.1:80", "10.0.0.1:80"],
        ["10.0.0.1,,10.0.0.2", "an empty entry"],
      ] as const) {
        const found = problem({ TRUSTED_PROXIES: value }, "TRUSTED_PROXIES");
        expect(found, value).to.include(entry);
        expect(found, value).to.include("an IP address or a CIDR");
      }
    });
  });

  describe("deployment file", function () {
    const addresses = {
      token: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      swap: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
      stableCoins: {
        DAI: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
        USDT: "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
        USDC: "0xDc64a140Aa3E981100a9becA4E685f962f0cF6C9",
      },
      feeds: {
        tokenUsd: "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707",
        eurUsd: "0x0165878A594ca255338adfa4d48449f69242Eb8F",
        chfUsd: "0xa513E6E4b8f2a923D98304ec87F64353C4D5C853",
      },
    };

    it("reads the addresses and the chain id, and ignores extra fields (such as those .dev/deployment.json has)", function () {
      const file = join(dir, "deployment.json");
      writeFileSync(file, JSON.stringify({ chainId: 31337, rpcUrl: "http://127.0.0.1:8545", ...addresses }));
      expect(readDeploymentFile(file)).to.deep.equal({ chainId: 31337, ...addresses });
    });

    it("takes a file without a chain id (one written by hand), and refuses one that is not a chain id", function () {
      const file = join(dir, "no-chain-id.json");
      writeFileSync(file, JSON.stringify(addresses));
      expect(readDeploymentFile(file)).to.deep.equal(addresses);
      for (const chainId of [0, -1, 1.5, "31337", null]) {
        writeFileSync(file, JSON.stringify({ ...addresses, chainId }));
        expect(() => readDeploymentFile(file), String(chainId)).to.throw(
          ConfigError,
          /DEPLOYMENT_FILE: .*chainId: must be a positive integer/,
        );
      }
    });

    it("names DEPLOYMENT_FILE and the bad field", function () {
      const file = join(dir, "bad.json");
      writeFileSync(file, JSON.stringify({ ...addresses, stableCoins: { ...addresses.stableCoins, USDT: "0x12" } }));
      expect(() => readDeploymentFile(file)).to.throw(ConfigError, /DEPLOYMENT_FILE: .*stableCoins\.USDT/);
      writeFileSync(file, JSON.stringify({ token: addresses.token }));
      expect(() => readDeploymentFile(file)).to.throw(ConfigError, /DEPLOYMENT_FILE: .*swap: is required/);
      writeFileSync(file, "{");
      expect(() => readDeploymentFile(file)).to.throw(ConfigError, /DEPLOYMENT_FILE: .*not valid JSON/);
      expect(() => readDeploymentFile(join(dir, "none.json"))).to.throw(ConfigError, /DEPLOYMENT_FILE: .*ENOENT/);
    });
  });
});
