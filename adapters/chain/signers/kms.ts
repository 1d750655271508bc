/**
 * The AWS KMS signer (SIGNER=aws-kms): each wallet's key is an asymmetric KMS key of spec
 * ECC_SECG_P256K1, used through @aws-sdk/client-kms with the SDK's own region, credential chain
 * and endpoint settings (AWS_REGION, AWS_PROFILE, roles, AWS_ENDPOINT_URL_KMS for a VPC endpoint).
 *
 * At start, GetPublicKey: a DER SubjectPublicKeyInfo, whose address must be the wallet address
 * the operator named for the key (EXCHANGE_ADDRESSES). A signature is `Sign` with MessageType
 * DIGEST and ECDSA_SHA_256 over the transaction's digest: a DER signature, parsed, normalised to
 * a low `s`, its recovery id found by trial recovery (recovery.ts), checked again before anything
 * is broadcast. Throttling (ThrottlingException), KMS's own internal errors and timeouts are
 * retried, with a growing pause, until SIGNER_TIMEOUT_MS is spent; a missing or disabled key, a
 * refused permission, or a budget spent fails the trade as unavailable, with nothing sent.
 */
import { GetPublicKeyCommand, type GetPublicKeyCommandOutput, KMSClient, SignCommand } from "@aws-sdk/client-kms";
import type { Signature } from "ethers";

import type { SignOptions, TransactionSigner } from "../tx/index.js";
import { type SignerLog, SignerStartError, signerUnavailable } from "./errors.js";
import type { OpenedSigners } from "./pkcs11.js";
import { addressOfSpki, derSignature, recoverableSignature } from "./recovery.js";

export interface KmsSignerSettings {
  /** Each wallet's key: a key id, key ARN, alias name or alias ARN (KMS_KEY_IDS). */
  keyIds: readonly string[];
  /** The wallet addresses the operator expects (EXCHANGE_ADDRESSES), one per key. */
  addresses: readonly string[];
  /** How long one signature may take, retries included, in ms. */
  timeoutMs: number;
  /** Most signatures asked for at once, per key. */
  concurrency: number;
  /** Where a refused signature's detail goes (the key, why): the client is told only the wallet. */
  log?: SignerLog;
}

/**
 * Errors worth another try within the budget, by name or by code: KMS asks to slow down, or failed
 * on its side, or the attempt timed out or lost its connection. The SDK's own request timeout
 * (throwOnRequestTimeout) is a TimeoutError whose code is ETIMEDOUT.
 */
const RETRIED = new Set([
  "ThrottlingException",
  "KMSInternalException",
  "DependencyTimeoutException",
  "TimeoutError",
  "AbortError",
  "RequestTimeout",
  "ETIMEDOUT",
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
]);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const nameOf = (error: unknown) => {
  const e = error as { name?: string; code?: string };
  return e.code?.startsWith("E") ? e.code : (e.name ?? "Error");
};

const retried = (error: unknown) => {
  const e = error as { name?: string; code?: string };
  return RETRIED.has(e.name ?? "") || RETRIED.has(e.code ?? "");
};

/**
 * One signer per KMS key, each checked against its wallet's address.
 * @throws SignerStartError naming KMS_KEY_IDS, EXCHANGE_ADDRESSES or AWS_REGION
 */
export async function openKmsSigners(settings: KmsSignerSettings): Promise<OpenedSigners> {
  if (settings.keyIds.length !== settings.addresses.length)
    throw new SignerStartError(
      "EXCHANGE_ADDRESSES",
      `names ${settings.addresses.length} wallet(s) for ${settings.keyIds.length} key(s) in KMS_KEY_IDS: one address per key`,
    );
  const attemptMs = Math.max(250, Math.floor(settings.timeoutMs / 2));
  const client = new KMSClient({
    maxAttempts: 1, // retried here, within the signature's budget
    requestHandler: { requestTimeout: attemptMs, connectionTimeout: attemptMs, throwOnRequestTimeout: true },
  });
  try {
    const signers: TransactionSigner[] = [];
    for (const [index, keyId] of settings.keyIds.entries()) {
      const address = await publicAddress(client, keyId);
      const expected = settings.addresses[index]!;
      if (address.toLowerCase() !== expected.toLowerCase())
        throw new SignerStartError(
          "EXCHANGE_ADDRESSES",
          `the KMS key ${keyId} is the key of ${address}, not of ${expected}`,
        );
      signers.push(kmsSigner(client, keyId, address, settings));
    }
    return { signers, close: async () => client.destroy() };
  } catch (error) {
    client.destroy();
    throw error;
  }
}

async function publicAddress(client: KMSClient, keyId: string): Promise<string> {
  let answer: GetPublicKeyCommandOutput;
  try {
    answer = await client.send(new GetPublicKeyCommand({ KeyId: keyId }));
  } catch (error) {
    const name = nameOf(error);
    if (/region/i.test((error as Error).message) && name === "Error")
      throw new SignerStartError("AWS_REGION", "is required by the AWS SDK to reach KMS (or a profile's region)");
    if (name === "CredentialsProviderError")
      throw new SignerStartError("AWS_PROFILE", `the AWS SDK found no credentials (${(error as Error).message})`);
    throw new SignerStartError("KMS_KEY_IDS", `GetPublicKey of ${keyId} failed (${name}: ${(error as Error).message})`);
  }
  if (answer.KeySpec !== "ECC_SECG_P256K1" || answer.KeyUsage !== "SIGN_VERIFY" || !answer.PublicKey)
    throw new SignerStartError(
      "KMS_KEY_IDS",
      `the KMS key ${keyId} is ${answer.KeySpec ?? "?"} for ${answer.KeyUsage ?? "?"}; the wallet needs ECC_SECG_P256K1 for SIGN_VERIFY`,
    );
  try {
    return addressOfSpki(answer.PublicKey);
  } catch (error) {
    throw new SignerStartError("KMS_KEY_IDS", `the public key of ${keyId}: ${(error as Error).message}`);
  }
}

function kmsSigner(client: KMSClient, keyId: string, address: string, settings: KmsSignerSettings): TransactionSigner {
  const what = `KMS key ${keyId}`;
  return {
    address,
    concurrency: settings.concurrency,
    async signDigest(digest: Uint8Array, options?: SignOptions): Promise<Signature> {
      const budget = { from: options?.startedAt ?? Date.now(), ms: settings.timeoutMs };
      const der = await signWithRetries(client, keyId, digest, budget, (reason) =>
        signerUnavailable(address, what, reason, settings.log),
      );
      let parsed: { r: bigint; s: bigint };
      try {
        parsed = derSignature(der);
      } catch (error) {
        throw signerUnavailable(
          address,
          what,
          `its signature cannot be read: ${(error as Error).message}`,
          settings.log,
        );
      }
      return recoverableSignature(address, digest, parsed.r, parsed.s);
    },
  };
}

/** KMS `Sign` of the digest, tried again on throttling and timeouts until the budget (`ms` from `from`) is spent. */
async function signWithRetries(
  client: KMSClient,
  keyId: string,
  digest: Uint8Array,
  budget: { from: number; ms: number },
  unavailable: (reason: string) => Error,
): Promise<Uint8Array> {
  const budgetMs = budget.ms;
  const until = budget.from + budgetMs;
  let pause = 10;
  // Every reason seen, in order: the last attempt cut short by the budget's own timeout still
  // says what KMS answered before it (ThrottlingException, …).
  const seen = new Set<string>();
  const reasons = () => (seen.size === 0 ? "no answer" : [...seen].join(", "));
  for (let attempt = 1; ; attempt++) {
    const left = until - Date.now();
    if (left <= 0) throw unavailable(`${reasons()}; no signature within ${budgetMs} ms`);
    try {
      const answer = await client.send(
        new SignCommand({ KeyId: keyId, Message: digest, MessageType: "DIGEST", SigningAlgorithm: "ECDSA_SHA_256" }),
        { abortSignal: AbortSignal.timeout(left) },
      );
      if (!answer.Signature) throw unavailable("KMS answered no signature");
      return answer.Signature;
    } catch (error) {
      const name = nameOf(error);
      seen.add(name);
      if (!retried(error)) {
        if (error instanceof Error && error.name === "ChainUnavailableError") throw error;
        throw unavailable(name);
      }
      const wait = Math.min(pause * (0.5 + Math.random()), until - Date.now());
      if (wait <= 0) throw unavailable(`${reasons()}, ${attempt} attempt(s) within ${budgetMs} ms`);
      await sleep(wait);
      pause = Math.min(pause * 2, 500);
    }
  }
}
