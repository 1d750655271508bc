/**
 * The access step of the composition root: ACCESS_FILE, checked against this service's wallets and
 * stable coins, kept in force, and read again when it (or its denylist) changes and on SIGHUP. A
 * new file with a problem is refused whole: the one in force stays, the refusal is logged as an
 * error and counted, never dropped to "no policy". The transports and the use cases read
 * `current()` on every request, so a removed or expired key is refused on its next one; trades
 * already past their authorize step finish.
 */
import type { EventEmitter } from "node:events";
import { stat } from "node:fs/promises";

import type { Logger } from "pino";

import type { AccessPolicy } from "../../core/index.js";
import { type AccessContext, loadAccessFile, type ReadFile, stampOf } from "../config/access-file.js";
import { type AppConfig, ConfigError } from "../config/env.js";
import type { Shutdown } from "./shutdown.js";

/** How often the files are looked at (their inode, size and times): a change is in force within about this, well under 2 s. */
const WATCH_INTERVAL_MS = 500;

/** What the access file's loads and refusals are told to (the metrics). */
export interface AccessObserver {
  loaded(policy: AccessPolicy, at: Date): void;
  refused(at: Date): void;
}

export class AccessControl {
  readonly #path: string;
  readonly #context: AccessContext;
  readonly #log: Logger;
  readonly #observer: AccessObserver | undefined;
  #policy: AccessPolicy;
  /** The files the policy in force (or the last refused one) was read from, as they were then. */
  #read: ReadFile[] = [];
  #poll: NodeJS.Timeout | undefined;
  #looking = false;

  constructor(path: string, context: AccessContext, log: Logger, observer?: AccessObserver) {
    this.#path = path;
    this.#context = context;
    this.#log = log;
    this.#observer = observer;
    const loaded = loadAccessFile(path, context);
    if (loaded.policy === undefined) throw new ConfigError(loaded.problems.map((p) => `ACCESS_FILE: ${p}`));
    this.#policy = loaded.policy;
    this.#read = loaded.files;
    // A stat poll of our own, against the stamps taken as the files were read: it follows renames
    // and symlink swaps (editors, Kubernetes ConfigMaps), which fs.watch loses, and misses no change
    // made between a read and the first poll (fs.watchFile's baseline is its own first stat).
    this.#poll = setInterval(() => void this.#look(), WATCH_INTERVAL_MS).unref();
    observer?.loaded(loaded.policy, new Date());
    log.info(
      { version: loaded.policy.version, keys: loaded.policy.keys.length, limits: loaded.policy.limits.length },
      "access file loaded",
    );
  }

  /** The policy in force. */
  readonly current = (): AccessPolicy => this.#policy;

  /** Reads the file again; the new policy is in force at once when it is valid and differs. */
  reload(reason: string): boolean {
    const loaded = loadAccessFile(this.#path, this.#context);
    if (loaded.files.length > 0) this.#read = loaded.files;
    if (loaded.policy === undefined) {
      this.#observer?.refused(new Date());
      this.#log.error(
        { reason, problems: loaded.problems, version: this.#policy.version },
        "access file refused: the one in force stays",
      );
      return false;
    }
    if (loaded.policy.version === this.#policy.version) return true;
    const before = this.#policy;
    this.#policy = loaded.policy;
    this.#observer?.loaded(loaded.policy, new Date());
    this.#log.info(
      { reason, version: loaded.policy.version, ...changes(before, loaded.policy) },
      "access file reloaded",
    );
    return true;
  }

  close(): void {
    clearInterval(this.#poll);
    this.#poll = undefined;
  }

  /** Reloads when a file read is no longer as it was (written, replaced, gone, or back). */
  async #look(): Promise<void> {
    if (this.#looking) return;
    this.#looking = true;
    try {
      const read = this.#read;
      const now = await Promise.all(
        read.map(({ path }) => stat(path).then(stampOf, (error: NodeJS.ErrnoException) => `missing:${error.code}`)),
      );
      if (this.#poll === undefined || read !== this.#read || now.every((stamp, i) => stamp === read[i]!.stamp)) return;
      this.reload("changed");
      // A file that could not be read at all (gone, no permission) is looked at again only once it changes again.
      if (this.#read === read) this.#read = read.map((file, i) => ({ path: file.path, stamp: now[i]! }));
    } finally {
      this.#looking = false;
    }
  }
}

/** What a reload changed, by name: keys and limits added and removed. */
function changes(before: AccessPolicy, after: AccessPolicy) {
  const diff = (a: readonly { name: string }[], b: readonly { name: string }[]) => {
    const names = new Set(a.map((x) => x.name));
    return b.filter((x) => !names.has(x.name)).map((x) => x.name);
  };
  return {
    keysAdded: diff(before.keys, after.keys),
    keysRemoved: diff(after.keys, before.keys),
    limitsAdded: diff(before.limits, after.limits),
    limitsRemoved: diff(after.limits, before.limits),
    denylisted: after.denylist.size,
  };
}

/**
 * The access control of ACCESS_FILE, or undefined without it (every key a trader with no
 * limits). Reloads on SIGHUP too (`hangUps`: where SIGHUP is heard, the process; a test gives an
 * emitter of its own, so that its process's signal handling stays as it was).
 * @throws ConfigError naming each problem, when the file does not fit this service's wallets or coins
 */
export function openAccess(
  config: AppConfig,
  context: AccessContext & { log: Logger; shutdown: Shutdown; observer?: AccessObserver; hangUps?: EventEmitter },
): AccessControl | undefined {
  if (config.access === undefined) return undefined;
  const { log, shutdown, observer, hangUps = process, ...known } = context;
  const control = new AccessControl(config.access.path, known, log, observer);
  const onHangUp = () => control.reload("SIGHUP");
  hangUps.on("SIGHUP", onHangUp);
  shutdown.push(async () => {
    hangUps.off("SIGHUP", onHangUp);
    control.close();
  });
  return control;
}
