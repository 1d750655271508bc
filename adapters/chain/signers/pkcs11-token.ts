/**
 * One PKCS#11 token, as the PKCS#11 signer uses it (pkcs11.ts): the vendor's module loaded
 * once, the user logged in with the PIN, each wallet's private key found by label or id, and a
 * pool of sessions, each signing one digest at a time (`C_SignInit`, then `C_Sign` on libuv's
 * thread pool, so the event loop never waits for the token and several sessions sign at once).
 *
 * When the token logs out, or the module says a session or a key handle is no longer valid
 * (another application called C_CloseAllSessions, the token was re-inserted, an HSM failover),
 * every session is dropped, a new one logs in again, the keys are looked up again and must
 * still be the wallets' (their public keys), and the signature is tried once more. The PIN is
 * kept for that, and never written anywhere: errors carry the module's return code only.
 */
import pkcs11js from "pkcs11js";

import { SignerStartError } from "./errors.js";
import { addressOfEcPoint, SECP256K1_OID } from "./recovery.js";

/** A wallet's key on the token: its CKA_LABEL, or its CKA_ID (hex). */
export type KeyRef = { label: string } | { id: string };

export interface TokenSettings {
  /** The vendor's PKCS#11 library (PKCS11_MODULE). */
  module: string;
  /** The token by label (PKCS11_TOKEN_LABEL) or slot id (PKCS11_SLOT). */
  token: { label: string } | { slot: number };
  pin: string;
  /** Most sessions signing at once. */
  sessions: number;
}

/** Return codes after which the sessions are opened again and the signature tried once more. */
const REOPEN = new Set<number>([
  pkcs11js.CKR_SESSION_HANDLE_INVALID,
  pkcs11js.CKR_SESSION_CLOSED,
  pkcs11js.CKR_USER_NOT_LOGGED_IN,
  pkcs11js.CKR_OBJECT_HANDLE_INVALID,
  pkcs11js.CKR_KEY_HANDLE_INVALID,
  pkcs11js.CKR_TOKEN_NOT_PRESENT,
  pkcs11js.CKR_DEVICE_REMOVED,
  pkcs11js.CKR_DEVICE_ERROR,
]);

/** The module's return code's name (CKR_PIN_INCORRECT), or the error's message: never the PIN. */
export function pkcs11Reason(error: unknown): string {
  if (error instanceof pkcs11js.Pkcs11Error)
    return error.message.split(":")[0]!.trim() || `CKR 0x${error.code.toString(16)}`;
  return error instanceof Error ? error.message : String(error);
}

const codeOf = (error: unknown) => (error instanceof pkcs11js.Pkcs11Error ? error.code : -1);

const trimmed = (label: string) => label.replace(/\0/g, "").trim();

export class Pkcs11Token {
  readonly #lib: pkcs11js.PKCS11;
  readonly #slot: Buffer;
  readonly #settings: TokenSettings;
  /** The token's label, for messages. */
  readonly name: string;
  /** Each wallet's key: what it was configured by, its private key handle, its address. */
  readonly #keys: Array<{ ref: KeyRef; handle: Buffer; address: string }> = [];
  readonly #idle: Buffer[] = [];
  #open = 0;
  readonly #waiting: Array<(session: Buffer) => void> = [];
  /** Bumped on every re-open: a session of an older generation is closed, never reused. */
  #generation = 0;
  #reopening: Promise<void> | undefined;
  #closed = false;

  private constructor(lib: pkcs11js.PKCS11, slot: Buffer, name: string, settings: TokenSettings) {
    this.#lib = lib;
    this.#slot = slot;
    this.name = name;
    this.#settings = settings;
  }

  /**
   * Loads the module, finds the token and logs in.
   * @throws SignerStartError naming PKCS11_MODULE, PKCS11_TOKEN_LABEL / PKCS11_SLOT or PKCS11_PIN_FILE
   */
  static open(settings: TokenSettings): Pkcs11Token {
    const lib = loadModule(settings.module);
    try {
      const { slot, name } = findSlot(lib, settings.token);
      const token = new Pkcs11Token(lib, slot, name, settings);
      token.#idle.push(token.#login());
      token.#open = 1;
      return token;
    } catch (error) {
      unloadModule(settings.module);
      throw error;
    }
  }

  /** A new session, logged in (the login is the application's, shared by all its sessions). */
  #login(): Buffer {
    const session = this.#lib.C_OpenSession(this.#slot, pkcs11js.CKF_SERIAL_SESSION);
    try {
      this.#lib.C_Login(session, pkcs11js.CKU_USER, this.#settings.pin);
    } catch (error) {
      if (codeOf(error) === pkcs11js.CKR_USER_ALREADY_LOGGED_IN) return session;
      this.#lib.C_CloseSession(session);
      const reason = pkcs11Reason(error);
      if (codeOf(error) === pkcs11js.CKR_PIN_INCORRECT || codeOf(error) === pkcs11js.CKR_PIN_LOCKED)
        throw new SignerStartError("PKCS11_PIN_FILE", `the token "${this.name}" refused the PIN (${reason})`);
      throw new SignerStartError("PKCS11_PIN_FILE", `could not log in to the token "${this.name}" (${reason})`);
    }
    return session;
  }

  /**
   * Finds the private key `ref` names and its public key's address, and keeps it as key number `index`.
   * @throws SignerStartError naming `variable` when the token has no such key pair on secp256k1
   */
  addKey(ref: KeyRef, variable: string): string {
    const session = this.#idle[0]!;
    const found = this.#find(session, ref, variable);
    this.#keys.push({ ref, ...found });
    return found.address;
  }

  #find(session: Buffer, ref: KeyRef, variable: string): { handle: Buffer; address: string } {
    const what = "label" in ref ? `labelled "${ref.label}"` : `with id ${ref.id}`;
    const match =
      "label" in ref
        ? { type: pkcs11js.CKA_LABEL, value: ref.label }
        : { type: pkcs11js.CKA_ID, value: Buffer.from(ref.id.replace(/^0x/, ""), "hex") };
    const one = (objectClass: number) => {
      this.#lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_CLASS, value: objectClass }, match]);
      try {
        return this.#lib.C_FindObjects(session, 2);
      } finally {
        this.#lib.C_FindObjectsFinal(session);
      }
    };
    const privates = one(pkcs11js.CKO_PRIVATE_KEY);
    const publics = one(pkcs11js.CKO_PUBLIC_KEY);
    if (privates.length !== 1 || publics.length !== 1) {
      const problem = privates.length > 1 || publics.length > 1 ? "more than one key" : "no key pair";
      throw new SignerStartError(variable, `the token "${this.name}" has ${problem} ${what}`);
    }
    const [params, point] = this.#lib.C_GetAttributeValue(session, publics[0]!, [
      { type: pkcs11js.CKA_EC_PARAMS },
      { type: pkcs11js.CKA_EC_POINT },
    ]);
    if (!Buffer.isBuffer(params?.value) || Buffer.compare(params.value, Buffer.from(SECP256K1_OID)) !== 0)
      throw new SignerStartError(variable, `the key ${what} on the token "${this.name}" is not a secp256k1 key`);
    return { handle: privates[0]!, address: addressOfEcPoint(point!.value as Buffer) };
  }

  /**
   * Signs `digest` with key number `index` (CKM_ECDSA): 64 bytes, `r‖s`. A closed session or a
   * logged-out token is opened again once (the keys looked up again, and still the wallets').
   */
  async sign(index: number, digest: Uint8Array): Promise<Buffer> {
    try {
      return await this.#signOnce(index, digest);
    } catch (error) {
      if (!REOPEN.has(codeOf(error)) || this.#closed) throw error;
      await this.#reopen();
      return this.#signOnce(index, digest);
    }
  }

  async #signOnce(index: number, digest: Uint8Array): Promise<Buffer> {
    const generation = this.#generation;
    const session = await this.#acquire();
    let healthy = true;
    try {
      const key = this.#keys[index]!;
      this.#lib.C_SignInit(session, { mechanism: pkcs11js.CKM_ECDSA }, key.handle);
      return await new Promise<Buffer>((resolve, reject) =>
        this.#lib.C_Sign(session, Buffer.from(digest), Buffer.alloc(72), (error, signature) =>
          error ? reject(error) : resolve(signature),
        ),
      );
    } catch (error) {
      healthy = !REOPEN.has(codeOf(error));
      throw error;
    } finally {
      this.#release(session, healthy && generation === this.#generation);
    }
  }

  /** An idle session, a new one while fewer than `sessions` are open, or the next one released. */
  async #acquire(): Promise<Buffer> {
    if (this.#reopening) await this.#reopening;
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    if (this.#open < this.#settings.sessions) {
      this.#open += 1;
      try {
        return this.#lib.C_OpenSession(this.#slot, pkcs11js.CKF_SERIAL_SESSION);
      } catch (error) {
        this.#open -= 1;
        throw error;
      }
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(session: Buffer, reuse: boolean): void {
    if (!reuse) {
      this.#open -= 1;
      try {
        this.#lib.C_CloseSession(session);
      } catch {
        // Already closed by the module: nothing to give back.
      }
      return;
    }
    const next = this.#waiting.shift();
    if (next) next(session);
    else this.#idle.push(session);
  }

  /** Drops every session, logs in on a new one and looks the keys up again (once, however many ask). */
  #reopen(): Promise<void> {
    this.#reopening ??= (async () => {
      this.#generation += 1;
      for (const session of this.#idle.splice(0)) this.#release(session, false);
      const session = this.#login();
      try {
        for (const key of this.#keys) {
          const found = this.#find(session, key.ref, "PKCS11_KEY_LABELS");
          if (found.address !== key.address) throw new Error(`the key now answers for ${found.address}`);
          key.handle = found.handle;
        }
      } catch (error) {
        this.#lib.C_CloseSession(session);
        throw error;
      }
      this.#open += 1;
      this.#release(session, true);
    })().finally(() => {
      this.#reopening = undefined;
    });
    return this.#reopening;
  }

  /** Closes its sessions and lets the module go (at shutdown). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const session of this.#idle.splice(0)) this.#release(session, false);
    unloadModule(this.#settings.module);
  }
}

/**
 * The modules loaded in this process, by path, with how many tokens use each: a module is
 * initialised once per process (a second C_Initialize is refused), and finalised with its last user.
 */
const modules = new Map<string, { lib: pkcs11js.PKCS11; users: number }>();

/**
 * The module at `path`, loaded and initialised.
 * @throws SignerStartError naming PKCS11_MODULE
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
      throw new SignerStartError("PKCS11_MODULE", `cannot load ${path} (${pkcs11Reason(error)})`);
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
function findSlot(lib: pkcs11js.PKCS11, token: TokenSettings["token"]): { slot: Buffer; name: string } {
  const slots = lib.C_GetSlotList(true);
  const labels = slots.map((slot) => trimmed(lib.C_GetTokenInfo(slot).label));
  if ("label" in token) {
    const index = labels.indexOf(token.label);
    if (index < 0)
      throw new SignerStartError(
        "PKCS11_TOKEN_LABEL",
        `no token labelled "${token.label}" (tokens present: ${labels.map((l) => `"${l}"`).join(", ") || "none"})`,
      );
    return { slot: slots[index]!, name: token.label };
  }
  const index = slots.findIndex((slot) => slot.readBigUInt64LE(0) === BigInt(token.slot));
  if (index < 0) throw new SignerStartError("PKCS11_SLOT", `no token in slot ${token.slot}`);
  return { slot: slots[index]!, name: labels[index]! };
}
