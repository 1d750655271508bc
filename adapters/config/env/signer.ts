/**
 * Where the wallets' keys are when they are not in this process: SIGNER=pkcs11 (an HSM through
 * its vendor's PKCS#11 module) or SIGNER=aws-kms, each naming one key per wallet and the wallet
 * addresses they must be (EXCHANGE_ADDRESSES), checked against the keys' public keys at start.
 * The PIN is read from its file here, and never printed.
 */
import type { RemoteSignerConfig } from "./config.js";
import { readFile } from "./files.js";
import type { Env } from "./schema.js";

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HEX_ID = /^(0x)?([0-9a-fA-F]{2})+$/;

const list = (value: string | undefined) =>
  (value ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");

/** The variables each signer reads: set for another signer, they are a mistake worth naming. */
const PKCS11_ONLY = [
  "PKCS11_MODULE",
  "PKCS11_TOKEN_LABEL",
  "PKCS11_SLOT",
  "PKCS11_PIN_FILE",
  "PKCS11_KEY_LABELS",
  "PKCS11_KEY_IDS",
] as const;
const KMS_ONLY = ["KMS_KEY_IDS"] as const;

/** SIGNER's configuration; undefined for SIGNER=key (EXCHANGE_PRIVATE_KEYS or EXCHANGE_KEYSTORE, as before). */
export function signerConfig(e: Env, problems: string[]): RemoteSignerConfig | undefined {
  const kind = e.SIGNER;
  const stray = (names: readonly string[]) => {
    for (const name of names)
      if (e[name as keyof Env] !== undefined)
        problems.push(`${name}: is only used with SIGNER=${kind === "pkcs11" ? "aws-kms" : "pkcs11"}`);
  };
  if (kind === "key") {
    for (const name of [...PKCS11_ONLY, ...KMS_ONLY, "EXCHANGE_ADDRESSES"] as const)
      if (e[name] !== undefined) problems.push(`${name}: is only used with SIGNER=pkcs11 or SIGNER=aws-kms`);
    return undefined;
  }
  for (const name of ["EXCHANGE_PRIVATE_KEYS", "EXCHANGE_KEYSTORE", "EXCHANGE_KEYSTORE_PASSWORD_FILE"] as const)
    if (e[name] !== undefined) problems.push(`${name}: is not used with SIGNER=${kind}: the keys are in the signer`);
  const addresses = list(e.EXCHANGE_ADDRESSES);
  if (addresses.length === 0)
    problems.push(
      `EXCHANGE_ADDRESSES: is required with SIGNER=${kind} (the wallets' addresses, one per key, comma-separated)`,
    );
  else if (!addresses.every((a) => ADDRESS.test(a)))
    problems.push("EXCHANGE_ADDRESSES: every address must be 0x followed by 40 hex digits");
  const timeoutMs = e.SIGNER_TIMEOUT_MS;
  if (kind === "aws-kms") {
    stray(PKCS11_ONLY);
    const keyIds = list(e.KMS_KEY_IDS);
    if (keyIds.length === 0)
      problems.push(
        "KMS_KEY_IDS: is required with SIGNER=aws-kms (each wallet's key id, ARN or alias, comma-separated)",
      );
    return { kind, keyIds, addresses, timeoutMs, concurrency: e.SIGNER_CONCURRENCY };
  }
  stray(KMS_ONLY);
  return pkcs11Config(e, addresses, timeoutMs, problems);
}

function pkcs11Config(
  e: Env,
  addresses: string[],
  timeoutMs: number,
  problems: string[],
): RemoteSignerConfig | undefined {
  if (e.PKCS11_MODULE === undefined)
    problems.push("PKCS11_MODULE: is required with SIGNER=pkcs11 (the vendor's PKCS#11 library, e.g. libsofthsm2.so)");
  if ((e.PKCS11_TOKEN_LABEL === undefined) === (e.PKCS11_SLOT === undefined))
    problems.push("PKCS11_TOKEN_LABEL: set either PKCS11_TOKEN_LABEL or PKCS11_SLOT (exactly one)");
  const labels = list(e.PKCS11_KEY_LABELS);
  const ids = list(e.PKCS11_KEY_IDS);
  if ((labels.length === 0) === (ids.length === 0))
    problems.push(
      "PKCS11_KEY_LABELS: set either PKCS11_KEY_LABELS or PKCS11_KEY_IDS (each wallet's key, comma-separated)",
    );
  if (!ids.every((id) => HEX_ID.test(id)))
    problems.push("PKCS11_KEY_IDS: every id must be hex (CKA_ID), e.g. 01 or 0xa1b2");
  let pin: string | undefined;
  if (e.PKCS11_PIN_FILE === undefined)
    problems.push("PKCS11_PIN_FILE: is required with SIGNER=pkcs11 (a file holding the token's user PIN)");
  else {
    const text = readFile("PKCS11_PIN_FILE", e.PKCS11_PIN_FILE, problems);
    // The file's last line break is not part of the PIN (echo and editors add one).
    pin = text?.replace(/\r?\n$/, "");
    if (pin === "") problems.push("PKCS11_PIN_FILE: is empty");
  }
  if (pin === undefined || e.PKCS11_MODULE === undefined || e.PKCS11_PIN_FILE === undefined) return undefined;
  return {
    kind: "pkcs11",
    module: e.PKCS11_MODULE,
    token: e.PKCS11_SLOT !== undefined ? { slot: e.PKCS11_SLOT } : { label: e.PKCS11_TOKEN_LABEL ?? "" },
    pin,
    pinFile: e.PKCS11_PIN_FILE,
    keys: labels.length > 0 ? labels.map((label) => ({ label })) : ids.map((id) => ({ id })),
    keyVariable: labels.length > 0 ? "PKCS11_KEY_LABELS" : "PKCS11_KEY_IDS",
    addresses,
    sessions: e.SIGNER_CONCURRENCY,
    timeoutMs,
  };
}
