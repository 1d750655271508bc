/**
 * `npm start`'s command line (scripts/start.ts) as a process: configuration errors
 * stop it with a message naming the variable, production mode serves an existing
 * chain, and SIGTERM ends it with exit code 0 after in-flight work.
 * Also the banner's commands.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { Contract, JsonRpcProvider } from "ethers";
import { pino } from "pino";

import { EXAMPLE_CUSTOMER, banner } from "../../scripts/banner.js";
import { AGGREGATOR_ABI } from "../../adapters/chain/index.js";
import type { EmbeddedChain } from "../../adapters/dev-mode.js";
import { startEmbeddedChain } from "../../scripts/embedded-chain/chain.js";
import { freePort } from "../helpers/service-defaults.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "start-test-key-0123456789";

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

/** A module hook that reports on stderr every module loaded from the hardhat package. */
const REPORT_HARDHAT = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from "node:module";
registerHooks({ resolve(specifier, context, next) {
  const result = next(specifier, context);
  if (result.url.includes("/node_modules/hardhat/")) process.stderr.write("HARDHAT LOADED " + result.url + "\\n");
  return result;
} });`)}`;

/** Runs scripts/start.ts as `npm start` does (node --import tsx), with exactly `env` plus PATH. */
function run(env: Record<string, string>): Run {
  const child = spawn(process.execPath, ["--import", REPORT_HARDHAT, "--import", "tsx", "scripts/start.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("npm start (scripts/start.ts)", function () {
  it("(the Hardhat detector used below does see Hardhat when it is loaded)", async function () {
    const child = spawn(
      process.execPath,
      ["--import", REPORT_HARDHAT, "--input-type=module", "-e", 'await import("hardhat/config")'],
      {
        cwd: ROOT,
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    await new Promise((resolve) => child.once("exit", resolve));
    expect(err).to.include("HARDHAT LOADED");
  });

  describe("with a bad configuration", function () {
    for (const [env, name] of [
      [{ PORT: "eighty" }, "PORT"],
      [
        { RPC_URL: "http://127.0.0.1:1", EXCHANGE_PRIVATE_KEYS: `0x${"11".repeat(32)}`, API_KEYS: KEY },
        "DEPLOYMENT_FILE",
      ],
      [{ RPC_URL: "http://127.0.0.1:1", DEPLOYMENT_FILE: "d.json", API_KEYS: KEY }, "EXCHANGE_KEYSTORE"],
      [
        { RPC_URL: "http://127.0.0.1:1", DEPLOYMENT_FILE: "d.json", EXCHANGE_PRIVATE_KEYS: `0x${"11".repeat(32)}` },
        "API_KEYS",
      ],
    ] as const) {
      it(`stops with exit code 1 and a message naming ${name}`, async function () {
        const r = run(env);
        expect(await r.exit).to.equal(1);
        expect(r.stderr()).to.match(new RegExp(`Cannot start: [^]*${name}:`));
        expect(r.stderr()).not.to.include("11".repeat(32));
      });
    }
  });

  it("runs its embedded chain in a child process that goes away when the service is killed with -9", async function () {
    const r = run({ PORT: "0", METRICS_PORT: String(await freePort()), CHAIN_PORT: "0", API_KEYS: KEY });
    try {
      await waitFor(() => r.stderr().includes("is ready"), "the banner");
      const rpcUrl = /Chain: +(http\S+)/.exec(r.stderr())![1]!;
      const chainId = async () =>
        fetch(rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
        }).then(
          (res) => res.ok,
          () => false,
        );
      expect(await chainId()).to.equal(true);
      r.child.kill("SIGKILL");
      await r.exit;
      await waitFor(async () => !(await chainId()), "the chain to stop answering", 15_000);
    } finally {
      if (r.child.exitCode === null) r.child.kill("SIGKILL");
    }
  });

  describe("the embedded chain", function () {
    it("re-posts its mock price feeds on a heartbeat, so the price never goes stale", async function () {
      const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }), feedHeartbeatMs: 100 });
      try {
        const rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true });
        const feed = new Contract(chain.addresses.feeds.tokenUsd, AGGREGATOR_ABI, rpc);
        const [firstRound, answer] = (await feed.getFunction("latestRoundData")()) as bigint[];
        await waitFor(
          async () => ((await feed.getFunction("latestRoundData")()) as bigint[])[0]! > firstRound!,
          "a new round",
        );
        const [, sameAnswer] = (await feed.getFunction("latestRoundData")()) as bigint[];
        expect(sameAnswer).to.equal(answer);
        rpc.destroy();
      } finally {
        await chain.close();
      }
    });
  });

  describe("in production mode on an existing chain", function () {
    let chain: EmbeddedChain;
    let dir: string;

    before(async function () {
      chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
      dir = mkdtempSync(join(tmpdir(), "start-"));
      // As npm run deploy writes it: with the chain id, which the start checks against the node's.
      writeFileSync(join(dir, "deployment.json"), JSON.stringify({ chainId: chain.chainId, ...chain.addresses }));
    });

    after(async function () {
      await chain?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("serves the API, then stops on SIGTERM with exit code 0 after answering the trade in flight", async function () {
      const r = run({
        RPC_URL: chain.rpcUrl,
        DEPLOYMENT_FILE: join(dir, "deployment.json"),
        EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
        API_KEYS: KEY,
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: dir,
      });
      try {
        await waitFor(() => r.stderr().includes("is ready"), "the banner");
        const apiUrl = /API: +(http\S+)/.exec(r.stderr())![1]!;
        expect(r.stderr()).to.include("existing chain");
        expect(r.stderr()).not.to.include(KEY); // configured keys are not printed
        const price = await fetch(`${apiUrl}/api/v1/token/price`, { headers: { api_key: KEY } });
        expect(price.status).to.equal(200);

        // Hold the trade in the mempool: with automine off it stays in flight until we mine.
        const rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true });
        const pending = () => rpc.getTransactionCount(chain.exchangeWallet.address, "pending");
        const before = await pending();
        await rpc.send("evm_setAutomine", [false]);
        const sell = fetch(`${apiUrl}/api/v1/token/sell`, {
          method: "POST",
          headers: { api_key: KEY, "content-type": "application/json" },
          body: JSON.stringify({
            userAddress: chain.exchangeWallet.address,
            destinatary: EXAMPLE_CUSTOMER,
            amount: "1",
            usdAddress: chain.addresses.stableCoins.DAI,
          }),
        });
        const until = Date.now() + 10_000;
        while ((await pending()) === before && Date.now() < until)
          await new Promise((resolve) => setTimeout(resolve, 20));
        expect(await pending()).to.equal(before + 1);

        r.child.kill("SIGTERM");
        await waitFor(() => r.stdout().includes('"msg":"server closing'), "the shutdown to begin", 10_000);
        expect(r.stdout()).to.match(/"inFlight":1,"msg":"server closing/);
        expect(r.child.exitCode).to.equal(null); // still waiting for the trade
        await rpc.send("evm_mine", []);
        await rpc.send("evm_setAutomine", [true]);
        rpc.destroy();
        const answer = await sell;
        expect(answer.status).to.equal(200);
        expect(Object.keys(((await answer.json()) as { events: object }).events)).to.have.length(5);
        expect(await r.exit).to.equal(0);
        expect(r.stdout()).to.include('"msg":"stopped"');
        expect(r.stdout()).not.to.include(KEY);
        expect(r.stdout()).not.to.include(chain.exchangeWallet.privateKey.slice(2));
        expect(r.stderr()).not.to.include("HARDHAT LOADED"); // production mode never loads Hardhat
      } finally {
        if (r.child.exitCode === null) r.child.kill("SIGKILL");
      }
    });

    it("stops with exit code 1, naming both chain ids, when the deployment file is for another chain", async function () {
      const file = join(dir, "other-chain.json");
      writeFileSync(file, JSON.stringify({ chainId: 1, ...chain.addresses }));
      const r = run({
        RPC_URL: chain.rpcUrl,
        DEPLOYMENT_FILE: file,
        EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
        API_KEYS: KEY,
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, "other-chain"),
      });
      try {
        await waitFor(() => r.child.exitCode !== null, "the start to stop", 30_000);
        expect(r.child.exitCode).to.equal(1);
        expect(r.stderr()).to.include(
          `Cannot start: invalid configuration:\n  - DEPLOYMENT_FILE: ${file} is for chain 1, but RPC_URL serves chain ${chain.chainId}`,
        );
        expect(r.stderr()).not.to.include("is ready");
      } finally {
        if (r.child.exitCode === null) r.child.kill("SIGKILL");
      }
    });

    it("applies the feed bounds from the environment: the price and a sell answer 503 naming FEED_BOUNDS_TOKEN_USD, and nothing is sent", async function () {
      const r = run({
        RPC_URL: chain.rpcUrl,
        DEPLOYMENT_FILE: join(dir, "deployment.json"),
        EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
        API_KEYS: KEY,
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: dir,
        FEED_BOUNDS_TOKEN_USD: "2-3", // the embedded chain's token feed answers 1.25
      });
      try {
        await waitFor(() => r.stderr().includes("is ready"), "the banner");
        const apiUrl = /API: +(http\S+)/.exec(r.stderr())![1]!;
        const rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true });
        const before = await rpc.getTransactionCount(chain.exchangeWallet.address, "pending");
        const price = await fetch(`${apiUrl}/api/v1/token/price`, { headers: { api_key: KEY } });
        expect(price.status).to.equal(503);
        const body = (await price.json()) as { code: string; message: string };
        expect(body.message).to.include("the token/USD feed answered 1.25, outside FEED_BOUNDS_TOKEN_USD (2-3)");
        const sell = await fetch(`${apiUrl}/api/v1/token/sell`, {
          method: "POST",
          headers: { api_key: KEY, "content-type": "application/json" },
          body: JSON.stringify({
            userAddress: chain.exchangeWallet.address,
            destinatary: EXAMPLE_CUSTOMER,
            amount: "1",
            usdAddress: chain.addresses.stableCoins.DAI,
          }),
        });
        expect(sell.status).to.equal(503);
        expect(((await sell.json()) as { message: string }).message).to.include("outside FEED_BOUNDS_TOKEN_USD");
        expect(await rpc.getTransactionCount(chain.exchangeWallet.address, "pending")).to.equal(before);
        rpc.destroy();
      } finally {
        if (r.child.exitCode === null) r.child.kill("SIGTERM");
        await r.exit;
      }
    });
  });
});

describe("npm start's command line (package.json)", function () {
  this.timeout(60_000);
  let dir: string;

  // A checkout of its own, with or without a .env: the checkout's own .env (if a developer has
  // one) neither hides the message nor changes the configuration.
  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), "npm-start-"));
    copyFileSync(join(ROOT, "package.json"), join(dir, "package.json"));
    for (const linked of ["scripts", "node_modules"]) symlinkSync(join(ROOT, linked), join(dir, linked));
  });

  afterEach(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  /** `npm start` in that checkout, with exactly `env` plus PATH. */
  const npmStart = (env: Record<string, string>) =>
    spawnSync("npm", ["start", "--prefix", dir], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "", ...env },
      encoding: "utf8",
      timeout: 60_000,
    });

  it("says nothing about a .env when there is none", function () {
    const run = npmStart({ PORT: "eighty" });
    expect(run.status, run.stderr).to.not.equal(0);
    expect(run.stderr).to.include("Cannot start: invalid configuration");
    expect(run.stderr).to.match(/PORT: must be an integer/);
    // Node's own line for --env-file-if-exists was ".env not found. Continuing without it."
    expect(run.stderr).to.not.match(/\.env(?!\.example)/);
  });

  it("reads the .env when there is one", function () {
    writeFileSync(join(dir, ".env"), "PORT=eighty\n");
    const run = npmStart({});
    expect(run.status, run.stderr).to.not.equal(0);
    expect(run.stderr).to.match(/Cannot start: invalid configuration[\s\S]*PORT: must be an integer/);
  });
});

describe("npm start stopped as systemd, Docker and Kubernetes stop it", function () {
  it("drains on a SIGTERM to the whole process group (node hears it twice), answers the trade in flight, exits 0 and removes its temporary journal", async function () {
    // npm's own process group, as a service manager runs it: the signal reaches npm, which
    // forwards it to node, and node directly.
    const child = spawn("npm", ["start"], {
      cwd: ROOT,
      detached: true,
      env: {
        PATH: process.env.PATH ?? "",
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        CHAIN_PORT: "0",
        API_KEYS: KEY,
        CHAIN_BLOCK_TIME_MS: "1000",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await waitFor(() => err.includes("is ready") || child.exitCode !== null, "the banner", 120_000);
      const apiUrl = /API: +(http\S+)/.exec(err)![1]!;
      // Log lines are buffered (written within 200 ms): the banner on stderr may come first.
      await waitFor(() => /"journal":"([^"]+)"/.test(out), "the journal's log line", 5_000);
      const journal = /"journal":"([^"]+)"/.exec(out)![1]!;
      expect(existsSync(journal)).to.equal(true);
      const wallet = /Wallet: +(0x[0-9a-fA-F]{40})/.exec(err)![1]!;
      const dai = /DAI: +(0x[0-9a-fA-F]{40})/.exec(err)![1]!;
      const chain = new JsonRpcProvider(/Chain: +(http\S+)/.exec(err)![1]!, undefined, { staticNetwork: true });
      const pending = () => chain.getTransactionCount(wallet, "pending");
      const before = await pending();
      const sell = fetch(`${apiUrl}/api/v1/token/sell`, {
        method: "POST",
        headers: { api_key: KEY, "content-type": "application/json" },
        body: JSON.stringify({ userAddress: wallet, destinatary: EXAMPLE_CUSTOMER, amount: "1", usdAddress: dai }),
      });
      // In flight: sent to the chain, whose next block is up to a second away.
      await waitFor(async () => (await pending()) > before, "the sell to reach the chain", 10_000);
      chain.destroy();
      process.kill(-child.pid!, "SIGTERM");
      const answer = await sell;
      expect(answer.status).to.equal(200);
      expect(await exit).to.equal(0);
      expect(out).to.include('"msg":"stopped"');
      expect(existsSync(journal), "the temporary journal is left behind").to.equal(false);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, "SIGKILL");
    }
  });
});

describe("the start banner", function () {
  const input = {
    apiUrl: "http://127.0.0.1:8080",
    rpcUrl: "http://127.0.0.1:8545",
    chainId: 31337,
    mode: "embedded" as const,
    wallets: ["0x70997970C51812dc3A010C7d01b50e0d17dc79C8"],
    addresses: {
      token: "0x0165878A594ca255338adfa4d48449f69242Eb8F",
      swap: "0xa513E6E4b8f2a923D98304ec87F64353C4D5C853",
      stableCoins: {
        DAI: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        USDT: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
        USDC: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
      },
      feeds: { tokenUsd: "0x1", eurUsd: "0x2", chfUsd: "0x3" },
    },
  };

  it("prints a curl command for each route of the SPEC and grpcurl commands for the same port", function () {
    const text = banner({ ...input, generatedApiKey: "gen-key_0123" });
    expect(text).to.include("export API_KEY='gen-key_0123'");
    for (const path of ["/api/v1/token/price", "/api/v1/token/sell", "/api/v1/token/buy", "/api/v1/remmitance"]) {
      expect(text).to.include(`curl -sS -w '\\n' http://127.0.0.1:8080${path} -H "api_key: $API_KEY"`);
    }
    expect(text).to.include(`"usdAddress":"${input.addresses.stableCoins.USDT}"`);
    expect(text).to.include("grpcurl -plaintext -import-path proto -proto tokentrade/v1/token.proto");
    expect(text).to.include("127.0.0.1:8080 tokentrade.v1.TokenService/Sell");
    expect(text).to.include("127.0.0.1:8080 tokentrade.v1.TokenService/GetPrice");
  });

  it("does not print configured keys", function () {
    const text = banner(input);
    expect(text).to.include("export API_KEY='<one of your API_KEYS>'");
  });
});
