/**
 * A SoftHSM token and keys for development (`npm run signer -- pkcs11 …`, and the tests): a token
 * in files under a directory of its own, initialised through PKCS#11 itself (C_InitToken,
 * C_InitPIN), so no PIN ever appears on a command line, and secp256k1 key pairs generated on the
 * token (C_GenerateKeyPair: the private key sensitive and never extractable). A vendor's HSM is
 * set up with the vendor's tools instead; the service only needs the key's label or id. The
 * binding (pkcs11js, an optional dependency) is loaded here only when a command needs it.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { addressOfEcPoint, pkcs11Modules } from "../adapters/chain/index.js";

const ENSURE = fileURLToPath(new URL("./ensure-softhsm.sh", import.meta.url));
/** The DER of secp256k1's OID, which EC_PARAMS holds. */
const SECP256K1 = Buffer.from("06052b8104000a", "hex");

/** SoftHSM's module, installed from Debian's packages when missing (scripts/ensure-softhsm.sh). */
export function softHsmModule(): string {
  const run = spawnSync("sh", [ENSURE], { encoding: "utf8" });
  if (run.status !== 0)
    throw new Error(`SoftHSM is not available: ${run.stderr.trim().split("\n").at(-1) ?? "ensure-softhsm.sh failed"}`);
  return run.stdout.trim().split("\n").at(-1)!;
}

export interface DevToken {
  /** SOFTHSM2_CONF: SoftHSM's configuration, naming the token directory. */
  conf: string;
  module: string;
  label: string;
  /** PKCS11_PIN_FILE: the user PIN (mode 0600). */
  pinFile: string;
}

/**
 * A SoftHSM configuration under `dir` (SOFTHSM2_CONF must name it before the module loads) and a
 * token labelled `label` in it, with a random user PIN and SO PIN, each in a file of mode 0600.
 */
export async function initDevToken(dir: string, label: string): Promise<DevToken> {
  const root = resolve(dir);
  mkdirSync(join(root, "tokens"), { recursive: true, mode: 0o700 });
  const conf = join(root, "softhsm2.conf");
  if (!existsSync(conf))
    writeFileSync(
      conf,
      `directories.tokendir = ${join(root, "tokens")}\nobjectstore.backend = file\nlog.level = ERROR\n`,
    );
  process.env.SOFTHSM2_CONF = conf;
  const module = softHsmModule();
  const pinFile = join(root, `${label}.pin`);
  const pin = randomBytes(12).toString("base64url");
  const soPin = randomBytes(12).toString("base64url");
  const { load, unload, pkcs11js } = await pkcs11Modules();
  const lib = load(module);
  try {
    const slot = lib.C_GetSlotList(false).find((s) => !(lib.C_GetTokenInfo(s).flags & pkcs11js.CKF_TOKEN_INITIALIZED));
    if (slot === undefined) throw new Error("SoftHSM offers no free slot");
    lib.C_InitToken(slot, soPin, label.padEnd(32, " "));
    // The token moves to a slot of its own once initialised: found again by its label.
    const ready = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.replace(/\0/g, "").trim() === label);
    if (ready === undefined) throw new Error(`the token "${label}" was not found after its initialisation`);
    const session = lib.C_OpenSession(ready, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
    lib.C_Login(session, pkcs11js.CKU_SO, soPin);
    lib.C_InitPIN(session, pin);
    lib.C_Logout(session);
    lib.C_CloseSession(session);
  } finally {
    unload(module);
  }
  writeFileSync(pinFile, `${pin}\n`, { mode: 0o600 });
  writeFileSync(join(root, `${label}.so-pin`), `${soPin}\n`, { mode: 0o600 });
  chmodSync(pinFile, 0o600);
  return { conf, module, label, pinFile };
}

/**
 * Generates a secp256k1 key pair labelled `keyLabel` on the token (its CKA_ID random), and
 * answers its address: the wallet to fund.
 */
export async function newKey(token: DevToken, keyLabel: string): Promise<{ address: string; id: string }> {
  process.env.SOFTHSM2_CONF = token.conf;
  const pin = readFileSync(token.pinFile, "utf8").replace(/\r?\n$/, "");
  const id = randomBytes(8);
  const { load, unload, pkcs11js } = await pkcs11Modules();
  const lib = load(token.module);
  try {
    const slot = lib
      .C_GetSlotList(true)
      .find((s) => lib.C_GetTokenInfo(s).label.replace(/\0/g, "").trim() === token.label);
    if (slot === undefined) throw new Error(`no token labelled "${token.label}"`);
    const session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
    try {
      lib.C_Login(session, pkcs11js.CKU_USER, pin);
      const common = [
        { type: pkcs11js.CKA_TOKEN, value: true },
        { type: pkcs11js.CKA_LABEL, value: keyLabel },
        { type: pkcs11js.CKA_ID, value: id },
      ];
      const keys = lib.C_GenerateKeyPair(
        session,
        { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
        [...common, { type: pkcs11js.CKA_EC_PARAMS, value: SECP256K1 }, { type: pkcs11js.CKA_VERIFY, value: true }],
        [
          ...common,
          { type: pkcs11js.CKA_PRIVATE, value: true },
          { type: pkcs11js.CKA_SENSITIVE, value: true },
          { type: pkcs11js.CKA_EXTRACTABLE, value: false },
          { type: pkcs11js.CKA_SIGN, value: true },
        ],
      );
      const [point] = lib.C_GetAttributeValue(session, keys.publicKey, [{ type: pkcs11js.CKA_EC_POINT }]);
      return { address: addressOfEcPoint(point!.value as Buffer), id: id.toString("hex") };
    } finally {
      lib.C_CloseSession(session);
    }
  } finally {
    unload(token.module);
  }
}
