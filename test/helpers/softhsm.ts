/**
 * SoftHSM tokens for the PKCS#11 signer's tests: Debian's softhsm2 and opensc, installed by
 * scripts/ensure-softhsm.sh when missing (as root; elsewhere the tests fail with the command to
 * run), one token directory per test process (SoftHSM reads SOFTHSM2_CONF once, when its module
 * loads), tokens and keys made as `npm run signer -- pkcs11 …` makes them.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { type DevToken, initDevToken, newKey } from "../../scripts/signer-pkcs11.js";

let dir: string | undefined;

/** The directory this process's tokens live in (its SOFTHSM2_CONF set). */
function tokenDir(): string {
  if (dir === undefined) {
    const made = mkdtempSync(join(tmpdir(), "softhsm-test-"));
    process.once("exit", () => rmSync(made, { recursive: true, force: true }));
    dir = made;
  }
  return dir;
}

export interface TestToken extends DevToken {
  /** The user PIN (tests only: it must never appear in the service's output). */
  pin: string;
  /** The variables that point the service at this token (SOFTHSM2_CONF included). */
  env: Record<string, string>;
  /** A new secp256k1 key on it: its label and address. */
  newKey(label: string): Promise<{ label: string; address: string; id: string }>;
  /** Deletes the token, as if it were pulled out: every later signature fails. */
  remove(): void;
}

/** A new SoftHSM token labelled `label`, with a random PIN. */
export async function softHsmToken(label: string): Promise<TestToken> {
  const token = await initDevToken(tokenDir(), label);
  const pin = readFileSync(token.pinFile, "utf8").trim();
  return {
    ...token,
    pin,
    env: {
      SOFTHSM2_CONF: token.conf,
      SIGNER: "pkcs11",
      PKCS11_MODULE: token.module,
      PKCS11_TOKEN_LABEL: label,
      PKCS11_PIN_FILE: token.pinFile,
    },
    newKey: async (keyLabel) => ({ label: keyLabel, ...(await newKey(token, keyLabel)) }),
    remove() {
      const run = spawnSync("softhsm2-util", ["--delete-token", "--token", label], {
        env: { ...process.env, SOFTHSM2_CONF: token.conf },
        encoding: "utf8",
      });
      if (run.status !== 0) throw new Error(`softhsm2-util --delete-token failed: ${run.stderr}`);
    },
  };
}
