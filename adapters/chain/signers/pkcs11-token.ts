/**
 * One PKCS#11 token, as the signer's own process uses it (pkcs11-host.ts; never the service's
 * process, see pkcs11-process.ts): the vendor's module loaded once, the user logged in with the
 * PIN, each wallet's private key found by label or id, and a pool of sessions, each signing one
 * digest at a time. Every call but C_Sign runs on that process's event loop; C_Sign runs on its
 * libuv pool, so several sessions sign at once. A call that never returns is the parent's to
 * notice: it kills this process, and with it the module and its sessions.
 *
 * The pool serves its callers in the order they came, a session belongs to the generation of
 * logins it was opened in, and a caller that gave up (cancel) leaves the queue without the token
 * doing anything for it. When the token logs out, or the module says a session or a key handle is
 * no longer valid (another application called C_CloseAllSessions, an HSM failover), every session
 * is dropped, a new one logs in again, the keys are looked up again and must still be the same
 * keys (their public points), and the signature is tried once more. A PIN the token refuses then
 * is never offered again by this process. The PIN is kept for the logins, and never written
 * anywhere: failures carry the module's return code only.
 */
import pkcs11js from "pkcs11js";

import { SECP256K1_OID } from "./curve.js";
import { codeOf, findSlot, loadModule, pkcs11Reason, type TokenRef, unloadModule } from "./pkcs11-module.js";
import { type FailureKind, TokenFailure } from "./pkcs11-failure.js";

/** A wallet's key on the token: its CKA_LABEL, or its CKA_ID (hex). */
export type KeyRef = { label: string } | { id: string };

export interface TokenSettings {
  /** The vendor's PKCS#11 library (PKCS11_MODULE). */
  module: string;
  /** The token by label (PKCS11_TOKEN_LABEL) or slot id (PKCS11_SLOT). */
  token: TokenRef;
  pin: string;
  /** Most sessions signing at once. */
  sessions: number;
}

export { type FailureKind, TokenFailure } from "./pkcs11-failure.js";
export { loadModule, pkcs11Reason, unloadModule } from "./pkcs11-module.js";

/** A signature's place in the pool, as the host tracks it: cancelled by its caller, or in the token. */
export interface Ticket {
  cancelled: boolean;
  /** When C_SignInit was entered (performance.now()), once it was. */
  inTokenSince?: number | undefined;
  /** While it waits for a session: how it is taken out of the queue. */
  leave?: (() => void) | undefined;
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

/** Return codes that say the token or its slot is gone: re-initialising the module may find it again. */
const TOKEN_GONE = new Set<number>([
  pkcs11js.CKR_SLOT_ID_INVALID,
  pkcs11js.CKR_TOKEN_NOT_PRESENT,
  pkcs11js.CKR_TOKEN_NOT_RECOGNIZED,
  pkcs11js.CKR_DEVICE_REMOVED,
  pkcs11js.CKR_DEVICE_ERROR,
  pkcs11js.CKR_CRYPTOKI_NOT_INITIALIZED,
]);

/** Return codes of a PIN the token refuses: offering it again only brings the user's lock-out closer. */
const PIN_REFUSED = new Set<number>([
  pkcs11js.CKR_PIN_INCORRECT,
  pkcs11js.CKR_PIN_LOCKED,
  pkcs11js.CKR_PIN_EXPIRED,
  pkcs11js.CKR_PIN_INVALID,
  pkcs11js.CKR_PIN_LEN_RANGE,
]);

/** What kind of failure a signature's error is (a token gone, or just this signature). */
export function failureKind(error: unknown): FailureKind {
  if (error instanceof TokenFailure) return error.kind;
  return TOKEN_GONE.has(codeOf(error)) ? "token" : "sign";
}

interface Session {
  handle: Buffer;
  /** The logins it was opened under: a session of an older generation is closed, never reused. */
  generation: number;
}

/** A caller waiting for a session: given one, or the right to open one ("open"), or told it left ("left"). */
type Grant = (grant: Session | "open" | "left") => void;

export class Pkcs11Token {
  readonly #lib: pkcs11js.PKCS11;
  readonly #slot: Buffer;
  readonly #settings: TokenSettings;
  /** The token's label, for messages. */
  readonly name: string;
  /** Each wallet's key: what it was configured by, its private key handle, its public point. */
  readonly #keys: Array<{ ref: KeyRef; variable: string; handle: Buffer; point: Buffer }> = [];
  readonly #idle: Session[] = [];
  #open = 0;
  readonly #waiting: Grant[] = [];
  #generation = 0;
  /** Set once the token refused the PIN on a login again: no login is tried after it. */
  #pinRefused: TokenFailure | undefined;
  /** C_Sign calls on the pool, and whether close() waits for them. */
  #signing = 0;
  #closed = false;

  private constructor(lib: pkcs11js.PKCS11, slot: Buffer, name: string, settings: TokenSettings) {
    this.#lib = lib;
    this.#slot = slot;
    this.name = name;
    this.#settings = settings;
  }

  /**
   * Loads the module, finds the token and logs in.
   * @throws TokenFailure naming PKCS11_MODULE, PKCS11_TOKEN_LABEL / PKCS11_SLOT or PKCS11_PIN_FILE
   */
  static open(settings: TokenSettings): Pkcs11Token {
    const lib = loadModule(settings.module);
    try {
      const { slot, name } = findSlot(lib, settings.token);
      const token = new Pkcs11Token(lib, slot, name, settings);
      token.#idle.push({ handle: token.#login(), generation: 0 });
      token.#open = 1;
      return token;
    } catch (error) {
      unloadModule(settings.module);
      throw error;
    }
  }

  get #tokenVariable(): string {
    return "label" in this.#settings.token ? "PKCS11_TOKEN_LABEL" : "PKCS11_SLOT";
  }

  /** A new session, logged in (the login is the application's, shared by all its sessions). */
  #login(): Buffer {
    if (this.#pinRefused) throw this.#pinRefused;
    const session = this.#openSession();
    try {
      this.#lib.C_Login(session, pkcs11js.CKU_USER, this.#settings.pin);
    } catch (error) {
      if (codeOf(error) === pkcs11js.CKR_USER_ALREADY_LOGGED_IN) return session;
      this.#closeQuietly(session);
      const reason = pkcs11Reason(error);
      if (PIN_REFUSED.has(codeOf(error))) {
        this.#pinRefused = new TokenFailure(
          "pin",
          "PKCS11_PIN_FILE",
          `the token "${this.name}" refused the PIN (${reason})`,
        );
        throw this.#pinRefused;
      }
      const kind = TOKEN_GONE.has(codeOf(error)) ? "token" : "sign";
      throw new TokenFailure(kind, this.#tokenVariable, `could not log in to the token "${this.name}" (${reason})`);
    }
    return session;
  }

  #openSession(): Buffer {
    try {
      return this.#lib.C_OpenSession(this.#slot, pkcs11js.CKF_SERIAL_SESSION);
    } catch (error) {
      const kind = TOKEN_GONE.has(codeOf(error)) ? "token" : "sign";
      throw new TokenFailure(
        kind,
        this.#tokenVariable,
        `the token "${this.name}" opens no session (${pkcs11Reason(error)})`,
      );
    }
  }

  #closeQuietly(session: Buffer): void {
    try {
      this.#lib.C_CloseSession(session);
    } catch {
      // Already closed by the module: nothing to give back.
    }
  }

  /**
   * Finds the key pair `ref` names, keeps it as the next key, and answers its public point (CKA_EC_POINT).
   * @throws TokenFailure naming `variable` when the token has no such key pair on secp256k1
   */
  addKey(ref: KeyRef, variable: string): Buffer {
    const session = this.#idle[0]!;
    const found = this.#find(session.handle, ref, variable);
    this.#keys.push({ ref, variable, ...found });
    return found.point;
  }

  #find(session: Buffer, ref: KeyRef, variable: string): { handle: Buffer; point: Buffer } {
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
      throw new TokenFailure("key", variable, `the token "${this.name}" has ${problem} ${what}`);
    }
    const [params, point] = this.#lib.C_GetAttributeValue(session, publics[0]!, [
      { type: pkcs11js.CKA_EC_PARAMS },
      { type: pkcs11js.CKA_EC_POINT },
    ]);
    if (!Buffer.isBuffer(params?.value) || Buffer.compare(params.value, Buffer.from(SECP256K1_OID)) !== 0)
      throw new TokenFailure("key", variable, `the key ${what} on the token "${this.name}" is not a secp256k1 key`);
    return { handle: privates[0]!, point: point!.value as Buffer };
  }

  /**
   * Signs `digest` with key number `index` (CKM_ECDSA): 64 bytes, `r‖s`. A closed session or a
   * logged-out token is opened again once (the keys looked up again, and still the same keys).
   * @throws TokenFailure, or the module's Pkcs11Error; "cancelled" when `ticket` was cancelled
   *   before the token was asked anything for it
   */
  async sign(index: number, digest: Uint8Array, ticket: Ticket): Promise<Buffer> {
    try {
      return await this.#signOnce(index, digest, ticket);
    } catch (error) {
      if (!(error instanceof Reopen) || this.#closed) throw error instanceof Reopen ? error.cause : error;
      if (error.generation === this.#generation) this.#reopen();
      return this.#signOnce(index, digest, ticket).catch((again: unknown) => {
        throw again instanceof Reopen ? again.cause : again;
      });
    }
  }

  async #signOnce(index: number, digest: Uint8Array, ticket: Ticket): Promise<Buffer> {
    const session = await this.#acquire(ticket);
    if (ticket.cancelled) {
      this.#release(session, true);
      throw new TokenFailure("sign", undefined, "cancelled");
    }
    let healthy = true;
    ticket.inTokenSince = performance.now();
    try {
      const key = this.#keys[index]!;
      this.#lib.C_SignInit(session.handle, { mechanism: pkcs11js.CKM_ECDSA }, key.handle);
      this.#signing += 1;
      return await new Promise<Buffer>((resolve, reject) =>
        this.#lib.C_Sign(session.handle, Buffer.from(digest), Buffer.alloc(72), (error, signature) => {
          this.#signing -= 1;
          return error ? reject(error) : resolve(signature);
        }),
      );
    } catch (error) {
      healthy = !REOPEN.has(codeOf(error));
      throw healthy ? error : new Reopen(error, session.generation);
    } finally {
      ticket.inTokenSince = undefined;
      this.#release(session, healthy);
    }
  }

  /** An idle session, a new one while fewer than `sessions` are open, or the next one released, in the callers' order. */
  async #acquire(ticket: Ticket): Promise<Session> {
    if (this.#waiting.length === 0) {
      const idle = this.#idle.pop();
      if (idle !== undefined) return idle;
      if (this.#open < this.#settings.sessions) return this.#newSession();
    }
    const grant = await new Promise<Session | "open" | "left">((resolve) => {
      this.#waiting.push(resolve);
      ticket.leave = () => {
        const at = this.#waiting.indexOf(resolve);
        if (at >= 0) this.#waiting.splice(at, 1);
        resolve("left");
      };
    });
    ticket.leave = undefined;
    if (grant === "left") throw new TokenFailure("sign", undefined, "cancelled");
    return grant === "open" ? this.#newSession(true) : grant;
  }

  /** A session of this generation; `reserved` when its place in the count was taken for it already. */
  #newSession(reserved = false): Session {
    if (!reserved) this.#open += 1;
    try {
      return { handle: this.#openSession(), generation: this.#generation };
    } catch (error) {
      this.#open -= 1;
      this.#grantNext();
      throw error;
    }
  }

  #release(session: Session, healthy: boolean): void {
    if (!healthy || session.generation !== this.#generation || this.#closed) {
      this.#open -= 1;
      this.#closeQuietly(session.handle);
      this.#grantNext();
      return;
    }
    const next = this.#waiting.shift();
    if (next) next(session);
    else this.#idle.push(session);
  }

  /** The first callers waiting get to open the sessions that were closed. */
  #grantNext(): void {
    while (this.#waiting.length > 0 && this.#open < this.#settings.sessions && !this.#closed) {
      this.#open += 1;
      this.#waiting.shift()!("open");
    }
  }

  /** Drops every idle session, logs in on a new one and looks the keys up again: the next generation. */
  #reopen(): void {
    this.#generation += 1;
    for (const session of this.#idle.splice(0)) {
      this.#open -= 1;
      this.#closeQuietly(session.handle);
    }
    this.#open += 1;
    let handle: Buffer;
    try {
      handle = this.#login();
    } catch (error) {
      this.#open -= 1;
      this.#grantNext();
      throw reopenFailure(error);
    }
    try {
      for (const key of this.#keys) {
        const found = this.#find(handle, key.ref, key.variable);
        if (Buffer.compare(found.point, key.point) !== 0)
          throw new TokenFailure("key", key.variable, `the key on the token "${this.name}" is no longer the wallet's`);
        key.handle = found.handle;
      }
    } catch (error) {
      this.#release({ handle, generation: this.#generation }, false);
      throw reopenFailure(error);
    }
    this.#release({ handle, generation: this.#generation }, true);
    this.#grantNext();
  }

  /** Whether a C_Sign is still on the pool (close() then leaves the module as it is). */
  get signing(): boolean {
    return this.#signing > 0;
  }

  /** Closes its sessions and finalises the module: only once no C_Sign is in it. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const session of this.#idle.splice(0)) this.#closeQuietly(session.handle);
    for (const waiter of this.#waiting.splice(0)) waiter("left");
    unloadModule(this.#settings.module);
  }
}

/**
 * A re-open's failure: a refused PIN, or a key that is gone or another, as it is; anything else
 * (a token gone, a module that answers CKR_GENERAL_ERROR for a token it lost) means this
 * process's view of the token is broken, and a new process may find it again.
 */
function reopenFailure(error: unknown): TokenFailure {
  if (error instanceof TokenFailure && (error.kind === "pin" || error.kind === "key")) return error;
  return new TokenFailure("token", undefined, pkcs11Reason(error));
}

/** A signature's failure that asks for the sessions to be opened again (carrying the session's generation). */
class Reopen extends Error {
  constructor(
    override readonly cause: unknown,
    readonly generation: number,
  ) {
    super("reopen");
  }
}
