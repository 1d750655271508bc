/**
 * The PKCS#11 token as the service sees it: in a child process of its own (pkcs11-host.ts) that
 * loads the vendor's module, holds the sessions and makes every PKCS#11 call. The service's
 * process never loads the module, so a token that stops answering (a network HSM gone quiet, a
 * call the vendor's library never returns from) holds neither its event loop nor its libuv pool
 * (fs, DNS, the access file's reload), and a call still in the token at shutdown cannot take the
 * service down with it.
 *
 * A process rather than a worker thread: a thread inside a native call cannot be stopped, and the
 * module it is in cannot be finalised or loaded again beside it. A process can be killed, and the
 * kernel closes what it held. Each signature is one message each way on the child's IPC channel.
 *
 * Every signature has its deadline (SIGNER_TIMEOUT_MS from when the trade first asked) and is
 * answered by then, signed or not. A call that stays in the token longer than SIGNER_TIMEOUT_MS,
 * or a child that does not answer for as long, means the token is stuck: the child is killed, and
 * the next signatures start a new one, which loads the module, logs in and finds the keys again
 * (they must be the same keys); the signatures the killed child held are asked of the new one
 * while their deadlines allow (nothing was sent for them: a signature only leaves through here).
 */
import { type ChildProcess, fork } from "node:child_process";

import type { SignerLog } from "./errors.js";
import { Pin } from "./pkcs11-pin.js";
import type { Failure, FromHost, HostSettings, ToHost } from "./pkcs11-protocol.js";
import type { KeyRef, TokenSettings } from "./pkcs11-token.js";

export type { SignerLog } from "./errors.js";

export interface ProcessSettings extends TokenSettings {
  keys: readonly KeyRef[];
  keyVariable: string;
  /** How long one signature may take, in ms; and how long a call may stay in the token. */
  timeoutMs: number;
  /** PKCS11_PIN_FILE, read again when the token refused the PIN (pkcs11-pin.ts). */
  pinFile?: string;
  /** Where what happens to the token is said (a logger; pino's fits). */
  log?: SignerLog;
}

/** A signature the token could not make, and why (for the server's log: never the PIN). */
export class TokenUnavailable extends Error {
  override name = "TokenUnavailable";
  constructor(readonly failure: Failure | { kind: "timeout" | "closed"; detail: string }) {
    super(failure.detail);
  }
}

/** The child's file beside this one: TypeScript through tsx in development, JavaScript in dist/. */
const HOST = import.meta.url.endsWith(".ts")
  ? { file: new URL("./pkcs11-host.ts", import.meta.url), execArgv: ["--import", import.meta.resolve("tsx")] }
  : { file: new URL("./pkcs11-host.js", import.meta.url), execArgv: [] };
/** How long a child may take to load the module, log in and find the keys. */
const START_MS = 30_000;
/** How long after a failed start the next one is tried; doubled each time, up to MAX_PAUSE_MS. */
const FIRST_PAUSE_MS = 1_000;
const MAX_PAUSE_MS = 10_000;

interface Request {
  id: number;
  key: number;
  digest: string;
  deadline: number;
  resolve: (signature: Buffer) => void;
  reject: (error: TokenUnavailable) => void;
  timer: NodeJS.Timeout;
  done: boolean;
  /** The children it was given to: one, or two when the first was killed under it. */
  attempts: number;
}

/** One child: its process, the signatures it holds, whether it opened the token. */
interface Host {
  child: ChildProcess;
  opened: Promise<void>;
  onOpened: (message: FromHost & { type: "opened" | "refused" }) => void;
  pending: Map<number, Request>;
  /** Signatures its caller gave up on, asked about (cancel), with the timer for a child that does not answer. */
  asked: Map<number, NodeJS.Timeout>;
  /** It opened the token and served signatures. */
  serving: boolean;
  dead: boolean;
}

export class TokenProcess {
  readonly #settings: ProcessSettings;
  #host: Host | undefined;
  #ids = 0;
  #closed = false;
  /** The token's label and each key's public point, as the first child found them. */
  name = "";
  points: string[] = [];
  #nextStart = 0;
  #pause = FIRST_PAUSE_MS;
  #lastFailure: TokenUnavailable | undefined;
  readonly #pin: Pin;

  private constructor(settings: ProcessSettings) {
    this.#settings = settings;
    this.#pin = new Pin(settings.pin, settings.pinFile, settings.log);
  }

  /**
   * A child with the token open and the keys found.
   * @throws TokenUnavailable with the failure (its variable) when it cannot open them
   */
  static async start(settings: ProcessSettings): Promise<TokenProcess> {
    const token = new TokenProcess(settings);
    const host = token.#spawn();
    token.#host = host;
    await host.opened;
    return token;
  }

  /**
   * The `r‖s` signature of `digest` by key number `key`, by `deadline` (Date.now() ms).
   * @throws TokenUnavailable when there is none by then, or the token cannot make it
   */
  sign(key: number, digest: Uint8Array, deadline: number): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      const request: Request = {
        id: ++this.#ids,
        key,
        digest: Buffer.from(digest).toString("hex"),
        deadline,
        resolve,
        reject,
        done: false,
        attempts: 0,
        timer: setTimeout(() => this.#expire(request), Math.max(0, deadline - Date.now())),
      };
      if (this.#closed) this.#settle(request, new TokenUnavailable({ kind: "closed", detail: "the signer is closed" }));
      else if (deadline <= Date.now())
        this.#expire(request); // its budget was spent on an earlier attempt
      else void this.#dispatch(request);
    });
  }

  async #dispatch(request: Request): Promise<void> {
    let host: Host;
    try {
      host = await this.#ready(request.deadline);
    } catch (error) {
      this.#settle(request, error as TokenUnavailable);
      return;
    }
    if (request.done) return;
    request.attempts += 1;
    host.pending.set(request.id, request);
    this.#send(host, { type: "sign", id: request.id, key: request.key, digest: request.digest });
  }

  #settle(request: Request, outcome: Buffer | TokenUnavailable): void {
    if (request.done) return;
    request.done = true;
    clearTimeout(request.timer);
    if (outcome instanceof TokenUnavailable) request.reject(outcome);
    else request.resolve(outcome);
  }

  /** Its deadline passed: answered now; the child is asked whether the token is still at it. */
  #expire(request: Request): void {
    this.#settle(
      request,
      new TokenUnavailable({ kind: "timeout", detail: `no answer within ${this.#settings.timeoutMs} ms` }),
    );
    const host = this.#host;
    if (host === undefined || !host.pending.delete(request.id)) return;
    this.#ask(host, request.id, this.#settings.timeoutMs);
  }

  /** Asks the child about signature `id`; a child that does not answer within `waitMs` is stuck. */
  #ask(host: Host, id: number, waitMs: number): void {
    if (host.dead || host.asked.has(id)) return;
    host.asked.set(
      id,
      setTimeout(() => this.#retire(host, `its process did not answer for ${waitMs} ms`), waitMs),
    );
    this.#send(host, { type: "cancel", id });
  }

  /** The child's answer about a signature given up on: a call in the token past SIGNER_TIMEOUT_MS is a stuck token. */
  #answered(host: Host, id: number, inTokenMs: number | undefined): void {
    clearTimeout(host.asked.get(id));
    host.asked.delete(id);
    if (inTokenMs === undefined) return;
    const left = this.#settings.timeoutMs - inTokenMs;
    if (left <= 0) this.#retire(host, `a call stayed in the token for more than ${this.#settings.timeoutMs} ms`);
    else setTimeout(() => this.#ask(host, id, this.#settings.timeoutMs), left).unref();
  }

  /** A child with the token open: the current one, or a new one (after a pause once a start failed). */
  async #ready(deadline: number): Promise<Host> {
    for (;;) {
      if (this.#closed) throw new TokenUnavailable({ kind: "closed", detail: "the signer is closed" });
      const host = this.#host;
      if (host !== undefined && !host.dead) {
        await host.opened;
        if (!host.dead) return host;
        continue;
      }
      const pin = this.#pin.value;
      const refusal = await this.#pin.refusal();
      if (refusal !== undefined) throw new TokenUnavailable(refusal);
      if (this.#pin.value !== pin) this.#nextStart = 0; // PKCS11_PIN_FILE holds another PIN: tried at once
      const wait = this.#nextStart - Date.now();
      if (wait > 0 && this.#lastFailure !== undefined && Date.now() + wait >= deadline) throw this.#lastFailure;
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      else this.#host = this.#spawn();
    }
  }

  #spawn(): Host {
    const { log: _, timeoutMs: __, pinFile: ___, ...rest } = this.#settings;
    const settings = { ...rest, pin: this.#pin.value };
    const child = fork(HOST.file, [], {
      execArgv: HOST.execArgv,
      // The child's C_Sign calls run on its libuv pool: one thread per session.
      env: { ...process.env, UV_THREADPOOL_SIZE: String(Math.max(4, settings.sessions)) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      serialization: "json",
    });
    child.unref();
    child.channel?.unref();
    let onOpened: Host["onOpened"] = () => {};
    const opened = new Promise<void>((resolve, reject) => {
      onOpened = (message) => (message.type === "opened" ? resolve() : reject(new TokenUnavailable(message.failure)));
    });
    opened.catch(() => {}); // awaited by whoever needs it
    const host: Host = { child, opened, onOpened, pending: new Map(), asked: new Map(), serving: false, dead: false };
    const startTimer = setTimeout(
      () => this.#refused(host, { kind: "token", detail: `the token did not open within ${START_MS} ms` }),
      START_MS,
    );
    void opened.then(
      () => clearTimeout(startTimer),
      () => clearTimeout(startTimer),
    );
    child.on("message", (message: FromHost) => this.#receive(host, message));
    // A child that dies (the vendor's library crashed it, it could not start) counts as a failed start.
    child.on("exit", (code, signal) =>
      this.#refused(host, { kind: "token", detail: `its process exited (${signal ?? `code ${code}`})` }),
    );
    child.on("error", (error) =>
      this.#refused(host, { kind: "token", detail: `its process failed (${error.message})` }),
    );
    this.#send(host, { type: "open", settings: settings satisfies HostSettings });
    return host;
  }

  #receive(host: Host, message: FromHost): void {
    switch (message.type) {
      case "opened":
        this.#opened(host, message);
        break;
      case "refused":
        this.#refused(host, message.failure);
        break;
      case "signed":
      case "failed": {
        if (message.type === "failed" && message.failure.kind === "pin") {
          this.#refused(host, message.failure); // its signature is answered as the token's next ones
          return;
        }
        if (message.type === "failed" && (message.failure.kind === "token" || message.failure.kind === "key")) {
          // The token or its slot is gone (pulled out, restarted): a new process initialises the
          // module again and finds the token by its label, maybe in another slot; this signature goes to it.
          this.#retire(host, message.failure.detail);
          return;
        }
        const request = host.pending.get(message.id);
        if (request === undefined) return;
        host.pending.delete(message.id);
        this.#settle(
          request,
          message.type === "signed" ? Buffer.from(message.signature, "hex") : new TokenUnavailable(message.failure),
        );
        break;
      }
      case "cancelled":
        this.#answered(host, message.id, message.inTokenMs);
        break;
    }
  }

  #opened(host: Host, message: FromHost & { type: "opened" }): void {
    if (this.points.length === 0) {
      this.name = message.name;
      this.points = message.points;
    } else if (message.points.some((point, i) => point !== this.points[i])) {
      this.#refused(host, {
        kind: "key",
        detail: `the token "${message.name}" now holds other keys under ${this.#settings.keyVariable}`,
      });
      return;
    }
    this.#pause = FIRST_PAUSE_MS;
    this.#lastFailure = undefined;
    host.serving = true;
    host.onOpened(message);
  }

  /**
   * The child could not open the token, or log in again: it goes, and the next start waits a
   * while; after a refused PIN, until PKCS11_PIN_FILE changes.
   */
  #refused(host: Host, failure: Failure): void {
    host.onOpened({ type: "refused", failure });
    if (host.dead) return;
    const again = this.points.length > 0; // not the first start, whose failure stops the service's start
    if (failure.kind === "pin" && again) this.#pin.refuse(failure, this.name);
    else if (again && !this.#closed)
      this.#settings.log?.warn(
        { token: this.name, reason: failure.detail, retryInMs: this.#pause },
        "the PKCS#11 token cannot be opened (again); its signatures fail until it can",
      );
    this.#lastFailure = new TokenUnavailable(failure);
    this.#nextStart = Date.now() + this.#pause;
    this.#pause = Math.min(this.#pause * 2, MAX_PAUSE_MS);
    this.#retire(host, failure.detail);
  }

  /**
   * Kills the child; the signatures it held go to the next one while their deadlines allow. A
   * child that had the token open is replaced at once, so the next signature finds one ready.
   */
  #retire(host: Host, reason: string): void {
    if (host.dead) return;
    host.dead = true;
    if (this.#host === host) this.#host = this.#closed || this.#lastFailure !== undefined ? undefined : this.#spawn();
    host.child.kill("SIGKILL");
    for (const timer of host.asked.values()) clearTimeout(timer);
    host.asked.clear();
    const held = [...host.pending.values()];
    host.pending.clear();
    if (host.serving && !this.#closed)
      this.#settings.log?.warn(
        { token: this.name, reason },
        "the PKCS#11 token's process was stopped; another opens the token for the next signatures",
      );
    for (const request of held) {
      if (request.attempts < 2 && !this.#closed) void this.#dispatch(request);
      else this.#settle(request, new TokenUnavailable({ kind: "token", detail: reason }));
    }
  }

  #send(host: Host, message: ToHost): void {
    if (!host.dead && host.child.connected) host.child.send(message);
  }

  /**
   * Lets the token go (at shutdown): the child finalises the module once no C_Sign is in it, or
   * is killed after a grace period; either way the module never goes while the service is in it.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const host = this.#host;
    this.#host = undefined;
    if (host === undefined || host.dead) return;
    const graceMs = Math.min(this.#settings.timeoutMs, 5_000);
    const exited = new Promise<void>((resolve) => host.child.once("exit", () => resolve()));
    this.#send(host, { type: "close", graceMs });
    const timer = setTimeout(() => this.#retire(host, "it did not close in time"), graceMs + 2_000);
    await exited;
    clearTimeout(timer);
    host.dead = true;
  }
}
