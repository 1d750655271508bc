/**
 * The vendor's PKCS#11 module, loaded once per process (a second C_Initialize is refused) and
 * finalised with its last user, and the slot of the token: the signer's own process uses these
 * (pkcs11-token.ts), and so do the set-up scripts and tests (index.ts, pkcs11Modules).
 */
import pkcs11js from "pkcs11js";

import { TokenFailure } from "./pkcs11-failure.js";

/** The token: by label (PKCS11_TOKEN_LABEL) or slot id (PKCS11_SLOT). */
export type TokenRef = { label: string } | { slot: number };

/** The module's return code of `error`, or -1 when it is none of the module's. */
export const codeOf = (error: unknown) => (error instanceof pkcs11js.Pkcs11Error ? error.code : -1);

/** The module's return code's name (CKR_PIN_INCORRECT), or the error's message: never the PIN. */
export function pkcs11Reason(error: unknown): string {
  if (error instanceof TokenFailure) return error.message;
  if (error instanceof pkcs11js.Pkcs11Error)
    return error.message.split(":")[0]!.trim() || `CKR 0x${error.code.toString(16)}`;
  return error instanceof Error ? error.message : String(error);
}

const trimmed = (label: string) => label.replace(/\0/g, "").trim();

/**
 * The modules loaded in this process, by path, with how many tokens use each: a module is
 * initialised once per process (a second C_Initialize is refused), and finalised with its last user.
 */
const modules = new Map<string, { lib: pkcs11js.PKCS11; users: number }>();

/**
 * The module at `path`, loaded and initialised.
 * @throws TokenFailure naming PKCS11_MODULE
 */
export function loadModule(path: string): pkcs11js.PKCS11 {
  const loaded = modules.get(path);
  if (loaded) {
    loaded.users += 1;
    return loaded.lib;
  }
  const lib = new pkcs11js.PKCS11();
  try {
    lib.load(path);
    lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  } catch (error) {
    if (codeOf(error) !== pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED)
      throw new TokenFailure("module", "PKCS11_MODULE", `cannot load ${path} (${pkcs11Reason(error)})`);
  }
  modules.set(path, { lib, users: 1 });
  return lib;
}

/** One user fewer of the module at `path`; the last one finalises and unloads it. */
export function unloadModule(path: string): void {
  const loaded = modules.get(path);
  if (!loaded) return;
  loaded.users -= 1;
  if (loaded.users > 0) return;
  modules.delete(path);
  try {
    loaded.lib.C_Finalize();
    loaded.lib.close();
  } catch {
    // The module is going away with the process anyway.
  }
}

/** The slot holding the token: by label, or by slot id. */
export function findSlot(lib: pkcs11js.PKCS11, token: TokenRef): { slot: Buffer; name: string } {
  const slots = lib.C_GetSlotList(true);
  const labels = slots.map((slot) => trimmed(lib.C_GetTokenInfo(slot).label));
  if ("label" in token) {
    const index = labels.indexOf(token.label);
    if (index < 0)
      throw new TokenFailure(
        "token",
        "PKCS11_TOKEN_LABEL",
        `no token labelled "${token.label}" (tokens present: ${labels.map((l) => `"${l}"`).join(", ") || "none"})`,
      );
    return { slot: slots[index]!, name: token.label };
  }
  const index = slots.findIndex((slot) => slot.readBigUInt64LE(0) === BigInt(token.slot));
  if (index < 0) throw new TokenFailure("token", "PKCS11_SLOT", `no token in slot ${token.slot}`);
  return { slot: slots[index]!, name: labels[index]! };
}
