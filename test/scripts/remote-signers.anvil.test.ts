/**
 * The service as `npm start` runs it, its wallets' keys in SoftHSM (SIGNER=pkcs11) or in the
 * tests' KMS-protocol server (SIGNER=aws-kms): trades on anvil (1 s blocks) and on the embedded
 * chain, each signed by the signer, and the failures: a token that stops answering mid-burst (the
 * tests' PKCS#11 shim in front of SoftHSM holds its C_Sign calls), KMS throttling, a wrong PIN, a
 * key that is another wallet's. In each, nothing is sent that was not
 * meant to be, and the wallet's nonces stay consecutive (nothing queued behind a gap).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { openKmsSigners, openPkcs11Signers, type DeploymentAddresses } from "../../adapters/chain/index.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../helpers/anvil.js";
import { anvilServiceEnv, startInstance, type Instance } from "../helpers/anvil-service.js";
import { kmsEnv, startKmsServer, type KmsServer } from "../helpers/kms-server.js";
import { pkcs11Shim } from "../helpers/pkcs11-shim.js";
import { freePort } from "../helpers/service-defaults.js";
import { softHsmToken, type TestToken } from "../helpers/softhsm.js";
import { waitFor } from "../helpers/wait.js";

const API_KEY = "remote-signers-test-key-0123456789";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

interface Answer {
  status: number;
  body: { status?: boolean; transactionHash?: string; from?: string; code?: string; message?: string };
}

function sell(apiUrl: string, wallet: string, usd: string): Promise<Answer> {
  return fetch(`${apiUrl}/api/v1/token/sell`, {
    method: "POST",
    headers: { api_key: API_KEY, "content-type": "application/json" },
    body: JSON.stringify({ userAddress: wallet, destinatary: CUSTOMER, amount: "1", usdAddress: usd }),
  }).then(async (response) => ({ status: response.status, body: (await response.json()) as Answer["body"] }));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("remote signers: the service's trades signed in SoftHSM and by KMS", function () {
  this.timeout(300_000);
  let anvil: Anvil;
  let dir: string;
  let token: TestToken;
  /** A second token, which stops answering in the middle of a burst. */
  let doomed: TestToken;
  let kms: KmsServer;
  let addresses: DeploymentAddresses;
  const wallets = { hsm: "", doomed: "", kms: "", kmsKey: "" };
  const running: Instance[] = [];
  let savedEnv: NodeJS.ProcessEnv;

  const nonce = async (wallet: string, tag: "latest" | "pending") =>
    Number(await anvil.rpc<string>("eth_getTransactionCount", [wallet, tag]));
  /** Nothing of the wallet waits in the pool: every nonce it used is mined, none queued behind a gap. */
  const settled = async (wallet: string) => {
    await waitFor(
      "the wallet's transactions to be mined",
      async () => (await nonce(wallet, "pending")) === (await nonce(wallet, "latest")),
    );
    const pool = await anvil.rpc<{ queued: Record<string, unknown> }>("txpool_content");
    expect(Object.keys(pool.queued).map((a) => a.toLowerCase())).to.not.include(wallet.toLowerCase());
    return nonce(wallet, "latest");
  };
  const pkcs11Env = (t: TestToken, label: string, address: string) => ({
    ...t.env,
    PKCS11_KEY_LABELS: label,
    EXCHANGE_ADDRESSES: address,
  });
  const start = async (env: Record<string, string>) => {
    const { EXCHANGE_PRIVATE_KEYS: _, ...base } = anvilServiceEnv(anvil, dir, API_KEY, "");
    const instance = await startInstance({
      ...base,
      DATA_DIR: join(dir, `data-${running.length}`),
      METRICS_PORT: String(await freePort()),
      ...env,
    });
    running.push(instance);
    return instance;
  };

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "remote-signers-"));
    token = await softHsmToken(`svc-${process.pid}`);
    doomed = await softHsmToken(`doomed-${process.pid}`);
    wallets.hsm = (await token.newKey("exchange")).address;
    wallets.doomed = (await doomed.newKey("exchange")).address;
    kms = await startKmsServer();
    const key = kms.createKey("exchange");
    wallets.kms = key.address;
    wallets.kmsKey = key.keyId;
    savedEnv = { ...process.env };
    Object.assign(process.env, kmsEnv(kms));
    anvil = await startAnvil({ blockTime: 1 });
    // The wallets' approvals at deployment are signed by the same signers.
    const hsm = await openPkcs11Signers({
      module: token.module,
      token: { label: token.label },
      pin: token.pin,
      keys: [{ label: "exchange" }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [wallets.hsm],
      sessions: 2,
      timeoutMs: 5_000,
    });
    const hsm2 = await openPkcs11Signers({
      module: doomed.module,
      token: { label: doomed.label },
      pin: doomed.pin,
      keys: [{ label: "exchange" }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [wallets.doomed],
      sessions: 2,
      timeoutMs: 5_000,
    });
    const remote = await openKmsSigners({
      keyIds: [key.keyId],
      addresses: [key.address],
      timeoutMs: 5_000,
      concurrency: 4,
    });
    try {
      addresses = await deployOnAnvil(anvil, 1000, [...hsm.signers, ...hsm2.signers, ...remote.signers]);
    } finally {
      await hsm.close();
      await hsm2.close();
      await remote.close();
    }
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
  });

  afterEach(function () {
    kms.throttle(0);
    for (const instance of running.splice(0)) if (instance.child.exitCode === null) instance.child.kill("SIGKILL");
  });

  after(async function () {
    process.env = savedEnv;
    await anvil?.stop();
    await kms?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const kind of ["pkcs11", "aws-kms"] as const)
    it(`${kind}: a burst of sells on anvil, every one signed by the signer, nonces consecutive, no secret printed`, async function () {
      const wallet = kind === "pkcs11" ? wallets.hsm : wallets.kms;
      const env =
        kind === "pkcs11"
          ? pkcs11Env(token, "exchange", wallet)
          : { ...kmsEnv(kms), SIGNER: "aws-kms", KMS_KEY_IDS: "alias/exchange", EXCHANGE_ADDRESSES: wallet };
      const service = await start(env);
      const before = await nonce(wallet, "latest");
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => sell(service.apiUrl, wallet, addresses.stableCoins.USDC)),
      );
      for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      expect(answers.every((a) => a.body.from?.toLowerCase() === wallet.toLowerCase())).to.equal(true);
      expect(await settled(wallet)).to.equal(before + 12);
      expect(service.output()).to.not.include(token.pin);
      expect(service.output()).to.not.include("wJalrXUtnFEMI");
    });

  it("pkcs11: a token that stops answering mid-burst fails those trades as unavailable, sends nothing for them, leaves no gap, and the service answers meanwhile", async function () {
    const wallet = wallets.doomed;
    const shim = pkcs11Shim(this, doomed);
    try {
      // npm start's defaults, SIGNER_TIMEOUT_MS=5000 included; the token's module is the shim in front of SoftHSM.
      const service = await start({
        ...pkcs11Env(doomed, "exchange", wallet),
        ...shim.env,
        PKCS11_MODULE: shim.module,
      });
      const before = await nonce(wallet, "latest");
      const first = await Promise.all([1, 2, 3].map(() => sell(service.apiUrl, wallet, addresses.stableCoins.DAI)));
      for (const answer of first) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      shim.hold("C_SignInit"); // the token stops answering, with trades coming in
      shim.hold("C_Sign");
      const pending: Array<Promise<Answer>> = [];
      for (let i = 0; i < 8; i++) {
        pending.push(sell(service.apiUrl, wallet, addresses.stableCoins.DAI));
        await sleep(25);
      }
      // While the signatures hang, the service answers its probes at once.
      const probes: number[] = [];
      for (let i = 0; i < 4; i++) {
        const started = performance.now();
        const health = await fetch(`${service.apiUrl}/healthz`, { signal: AbortSignal.timeout(2_000) });
        probes.push(performance.now() - started);
        expect(health.status).to.equal(200);
        await sleep(500);
      }
      expect(Math.max(...probes), "the slowest /healthz during the hang (ms)").to.be.below(1_000);
      const firstRefused = await Promise.race(
        pending.map((p) => p.then((a) => (a.status === 503 ? a : new Promise<never>(() => {})))),
      );
      expect(firstRefused.body.message).to.include(`the signer of ${wallet}`);
      shim.release("C_SignInit"); // it answers again: the trades still queued are signed
      shim.release("C_Sign");
      const answers = await Promise.all(pending);
      const ok = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status !== 200);
      expect(refused.length, "trades whose signatures hung").to.be.at.least(1);
      for (const answer of refused) {
        expect(answer.status, JSON.stringify(answer.body)).to.equal(503);
        // The client is told which wallet; the token's label and why are in the server's log.
        expect(answer.body.message).to.equal(
          `chain unavailable: the signer of ${wallet} cannot sign; nothing was sent`,
        );
      }
      expect(service.output()).to.include(
        `"signer":"PKCS#11 token \\"${doomed.label}\\"","reason":"no answer within 5000 ms"`,
      );
      expect(await settled(wallet), "one nonce per trade answered 200, none for the others").to.equal(
        before + first.length + ok.length,
      );
      const after = await sell(service.apiUrl, wallet, addresses.stableCoins.DAI);
      expect(after.status, JSON.stringify(after.body)).to.equal(200);
      expect(await settled(wallet), "the next trade takes the next nonce: no gap").to.equal(
        before + first.length + ok.length + 1,
      );
      expect(service.output()).to.not.include(doomed.pin);
    } finally {
      shim.remove();
    }
  });

  it("aws-kms: throttling mid-burst is retried within the budget; throttled past it, trades fail unavailable and the nonce does not move", async function () {
    const wallet = wallets.kms;
    const service = await start({
      ...kmsEnv(kms),
      SIGNER: "aws-kms",
      KMS_KEY_IDS: wallets.kmsKey,
      EXCHANGE_ADDRESSES: wallet,
      // The default budget: a neighbour's load on this shared machine must not eat a retry's time.
      SIGNER_TIMEOUT_MS: "5000",
    });
    const before = await nonce(wallet, "latest");
    kms.throttle(10);
    const burst = await Promise.all(
      Array.from({ length: 8 }, () => sell(service.apiUrl, wallet, addresses.stableCoins.USDT)),
    );
    for (const answer of burst) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(await settled(wallet)).to.equal(before + 8);

    kms.throttle(1_000_000);
    const throttled = await Promise.all(
      Array.from({ length: 3 }, () => sell(service.apiUrl, wallet, addresses.stableCoins.USDT)),
    );
    kms.throttle(0);
    for (const answer of throttled) {
      expect(answer.status, JSON.stringify(answer.body)).to.equal(503);
      // The client is told which wallet; the KMS key (its ARN names the account) and why are in the server's log.
      expect(answer.body.message).to.equal(`chain unavailable: the signer of ${wallet} cannot sign; nothing was sent`);
    }
    expect(service.output()).to.match(
      new RegExp(`"signer":"KMS key ${wallets.kmsKey}","reason":"(ThrottlingException|TimeoutError|AbortError)`),
    );
    const mark = kms.calls.length;
    const after = await sell(service.apiUrl, wallet, addresses.stableCoins.USDT);
    expect(kms.calls.length - mark, "signed at the first attempt").to.equal(1);
    expect(after.status, JSON.stringify(after.body)).to.equal(200);
    expect(await settled(wallet), "the next trade takes the next nonce: no gap").to.equal(before + 9);
  });

  it("a wrong PIN stops the start naming PKCS11_PIN_FILE, never the PIN, and sends nothing", async function () {
    const wrong = join(dir, "wrong.pin");
    writeFileSync(wrong, "not-the-pin-31337\n");
    const before = await nonce(wallets.hsm, "pending");
    const thrown = await start({ ...pkcs11Env(token, "exchange", wallets.hsm), PKCS11_PIN_FILE: wrong }).then(
      () => undefined,
      (error: unknown) => (error as Error).message,
    );
    expect(thrown).to.match(/PKCS11_PIN_FILE: the token "svc-\d+" refused the PIN \(CKR_PIN_INCORRECT\)/);
    expect(thrown).to.not.include("not-the-pin-31337");
    expect(thrown).to.not.include(token.pin);
    expect(await nonce(wallets.hsm, "pending")).to.equal(before);
  });

  it("a key that is another wallet's stops the start naming EXCHANGE_ADDRESSES, before any trade", async function () {
    const before = await nonce(wallets.kms, "pending");
    const thrown = await start(pkcs11Env(token, "exchange", wallets.kms)).then(
      () => undefined,
      (error: unknown) => (error as Error).message,
    );
    expect(thrown).to.include(
      `EXCHANGE_ADDRESSES: the key labelled "exchange" on the token "${token.label}" is the key of ${wallets.hsm}, not of ${wallets.kms}`,
    );
    expect(await nonce(wallets.kms, "pending")).to.equal(before);
    expect(await nonce(wallets.hsm, "pending")).to.equal(await nonce(wallets.hsm, "latest"));
  });

  for (const kind of ["pkcs11", "aws-kms"] as const)
    it(`${kind}: npm start's embedded chain funds the signer's wallet, and trades are signed by it`, async function () {
      const embeddedToken = kind === "pkcs11" ? await softHsmToken(`emb-${process.pid}`) : undefined;
      const key = (await embeddedToken?.newKey("dev")) ?? kms.createKey();
      const env =
        embeddedToken !== undefined
          ? pkcs11Env(embeddedToken, "dev", key.address)
          : {
              ...kmsEnv(kms),
              SIGNER: "aws-kms",
              KMS_KEY_IDS: (key as { keyId: string }).keyId,
              EXCHANGE_ADDRESSES: key.address,
            };
      const instance = await startInstance({
        PORT: "0",
        CHAIN_PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, `embedded-${kind}`),
        API_KEYS: API_KEY,
        ...env,
      });
      running.push(instance);
      const usdc = /USDC: +(0x[0-9a-fA-F]{40})/.exec(instance.output())?.[1];
      if (usdc === undefined) throw new Error(`no USDC address in the banner:\n${instance.output()}`);
      const answers = await Promise.all([1, 2, 3].map(() => sell(instance.apiUrl, key.address, usdc)));
      for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      expect(answers.every((a) => a.body.from?.toLowerCase() === key.address.toLowerCase())).to.equal(true);
      if (embeddedToken) expect(instance.output()).to.not.include(embeddedToken.pin);
    });
});
