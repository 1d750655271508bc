/**
 * The AWS KMS signer (adapters/chain/signers/kms.ts): the real @aws-sdk/client-kms against the
 * tests' own KMS-protocol server (test/helpers/kms-server.ts), reached through the SDK's own
 * AWS_ENDPOINT_URL_KMS, with static credentials and the instance-metadata probe off. Nothing
 * else is mocked, and nothing leaves the machine.
 */
import { expect } from "chai";
import { Transaction, Wallet, getBytes, randomBytes, recoverAddress } from "ethers";

import { openKmsSigners, type SignerStartError, type OpenedSigners } from "../../../adapters/chain/index.js";
import { signEip1559With } from "../../../adapters/chain/tx/index.js";
import { kmsEnv, startKmsServer, type KmsServer } from "../../helpers/kms-server.js";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const TX = {
  chainId: 31337n,
  maxFeePerGas: 3_000_000_000n,
  maxPriorityFeePerGas: 1_000_000_000n,
  gasLimit: 90_000n,
  value: 0n,
  data: "0x1234",
  to: Wallet.createRandom().address,
};

describe("AWS KMS signer against a local KMS-protocol server", function () {
  this.timeout(60_000);
  let kms: KmsServer;
  let saved: NodeJS.ProcessEnv;
  const opened: OpenedSigners[] = [];
  /** What the signers wrote to the server's log. */
  let logged: string[] = [];
  const log = {
    warn: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
    error: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
  };
  const open = async (keyIds: string[], addresses: string[], timeoutMs = 3_000) => {
    const signers = await openKmsSigners({ keyIds, addresses, timeoutMs, concurrency: 4, log });
    opened.push(signers);
    return signers.signers;
  };
  const startRefusal = (keyIds: string[], addresses: string[]) =>
    open(keyIds, addresses).then(
      () => {
        throw new Error("the signer opened");
      },
      (error: unknown) => error as SignerStartError,
    );
  const signRefusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: unknown) => error as Error,
    );

  before(async function () {
    kms = await startKmsServer();
    saved = { ...process.env };
    Object.assign(process.env, kmsEnv(kms));
  });

  after(async function () {
    process.env = saved;
    await kms.close();
  });

  afterEach(async function () {
    logged = [];
    for (const signers of opened.splice(0)) await signers.close();
    kms.delayMs = 0;
    kms.throttle(0);
  });

  it("derives the address from GetPublicKey, by key id and by alias, and signs transactions that recover to it", async function () {
    const a = kms.createKey("exchange-a");
    const b = kms.createKey();
    const signers = await open(["alias/exchange-a", b.arn], [a.address, b.address]);
    expect(signers.map((s) => s.address)).to.deep.equal([a.address, b.address]);
    for (const [nonce, signer] of signers.entries()) {
      const signed = await signEip1559With(signer, { ...TX, nonce });
      expect(Transaction.from(signed.rawTx).from).to.equal(signer.address);
    }
    expect(
      kms.calls.every((call) => call.signed),
      "every request signed with SigV4",
    ).to.equal(true);
  });

  it("normalises KMS's high s and finds the recovery id, for every digest", async function () {
    const key = kms.createKey();
    const [signer] = await open([key.keyId], [key.address]);
    const digests = Array.from({ length: 40 }, () => getBytes(randomBytes(32)));
    const signatures = await Promise.all(digests.map((digest) => signer!.signDigest(digest)));
    for (const [i, signature] of signatures.entries()) {
      expect(BigInt(signature.s) <= N / 2n).to.equal(true);
      expect(recoverAddress(digests[i]!, signature)).to.equal(key.address);
    }
  });

  it("retries ThrottlingException within its budget, and answers unavailable once the budget is spent", async function () {
    const key = kms.createKey();
    const [signer] = await open([key.keyId], [key.address], 1_000);
    const before = kms.calls.length;
    kms.throttle(3);
    const digest = getBytes(randomBytes(32));
    expect(recoverAddress(digest, await signer!.signDigest(digest))).to.equal(key.address);
    expect(kms.calls.length - before, "three throttled, then signed").to.equal(4);

    kms.throttle(1_000_000);
    const started = Date.now();
    const thrown = await signRefusal(signer!.signDigest(getBytes(randomBytes(32))));
    expect(Date.now() - started).to.be.below(1_500);
    expect(thrown?.name).to.equal("ChainUnavailableError");
    // The client is told which wallet cannot sign; the key, its account and why are for the server's log.
    expect(thrown?.message).to.equal(`chain unavailable: the signer of ${key.address} cannot sign; nothing was sent`);
    expect(logged.join("\n")).to.match(new RegExp(`"signer":"KMS key ${key.keyId}".*ThrottlingException`));
  });

  it("retries a request that times out, and answers unavailable when KMS never answers in time", async function () {
    const key = kms.createKey();
    // A budget of 1500 ms: each attempt gets half of it (750 ms), so one that times out leaves time for another.
    const [signer] = await open([key.keyId], [key.address], 1_500);
    const before = kms.calls.length;
    kms.delayMs = 1_200; // the first Sign is answered after its attempt's 750 ms
    const digest = getBytes(randomBytes(32));
    const signing = signer!.signDigest(digest);
    while (kms.calls.length === before) await new Promise((resolve) => setTimeout(resolve, 5));
    kms.delayMs = 0; // the retry is answered at once
    expect(recoverAddress(digest, await signing), "signed by the retry").to.equal(key.address);
    expect(
      kms.calls.slice(before).map((call) => call.target),
      "the Sign that timed out, and its retry",
    ).to.deep.equal(["TrentService.Sign", "TrentService.Sign"]);

    kms.delayMs = 2_000; // never within the budget
    const thrown = await signRefusal(signer!.signDigest(getBytes(randomBytes(32))));
    expect(thrown?.name).to.equal("ChainUnavailableError");
    expect(thrown?.message).to.include("nothing was sent");
  });

  it("spends the budget of the trade's first attempt: a signature asked for again gets only what is left", async function () {
    const key = kms.createKey();
    const [signer] = await open([key.keyId], [key.address], 1_000);
    const before = kms.calls.length;
    const thrown = await signRefusal(signer!.signDigest(getBytes(randomBytes(32)), { startedAt: Date.now() - 1_000 }));
    expect(thrown?.name).to.equal("ChainUnavailableError");
    expect(kms.calls.length - before, "no request once the budget is spent").to.equal(0);
    const digest = getBytes(randomBytes(32));
    const signature = await signer!.signDigest(digest, { startedAt: Date.now() - 500 });
    expect(recoverAddress(digest, signature), "within what is left").to.equal(key.address);
  });

  it("answers unavailable at once for a key disabled after the start", async function () {
    const key = kms.createKey();
    const [signer] = await open([key.keyId], [key.address]);
    kms.disable(key.keyId);
    const before = kms.calls.length;
    const thrown = await signRefusal(signer!.signDigest(getBytes(randomBytes(32))));
    expect(thrown?.message).to.equal(`chain unavailable: the signer of ${key.address} cannot sign; nothing was sent`);
    expect(logged.join("\n")).to.include("DisabledException");
    expect(kms.calls.length - before, "not retried").to.equal(1);
  });

  it("refuses to start on a missing key, a disabled key or a key of another wallet, naming the variable", async function () {
    const key = kms.createKey();
    const other = kms.createKey();
    expect((await startRefusal(["alias/nope"], [key.address])).message).to.match(
      /^KMS_KEY_IDS: GetPublicKey of alias\/nope failed \(NotFoundException/,
    );
    expect((await startRefusal([other.keyId], [key.address])).message).to.equal(
      `EXCHANGE_ADDRESSES: the KMS key ${other.keyId} is the key of ${other.address}, not of ${key.address}`,
    );
    kms.disable(other.keyId);
    expect((await startRefusal([other.keyId], [other.address])).message).to.match(/DisabledException/);
    expect((await startRefusal([key.keyId], [])).variable).to.equal("EXCHANGE_ADDRESSES");
  });
});
