/**
 * The access step of the composition root: ACCESS_FILE, checked against this service's wallets and
 * stable coins, kept in force, and read again when it (or its denylist) changes and on SIGHUP. A
 * new file with a problem is refused whole: the one in force stays, the refusal is logged as an
 * error and counted, never dropped to "no policy". The transports and the use cases read
 * `current()` on every request, so a removed or expired key is refused on its next one; trades
 * already past their authorize step finish.
 */
import { unwatchFile, watchFile } from "node:fs";

import type { Logger } from "pino";

import type { AccessPolicy } from "../../core/index.js";
import { type AccessContext, loadAccessFile } from "../config/access-file.js";
import { type AppConfig, ConfigError } from "../config/env.js";
import type { Shutdown } from "./shutdown.js";

/** How often the files are looked at (their size and time): a change is in force within about this, well under 2 s. */
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
  #watched: string[] = [];

  constructor(path: string, context: AccessContext, log: Logger, observer?: AccessObserver) {
    this.#path = path;
    this.#context = context;
    this.#log = log;
    this.#observer = observer;
    const loaded = loadAccessFile(path, context);
    if (loaded.policy === undefined) throw new ConfigError(loaded.problems.map((p) => `ACCESS_FILE: ${p}`));
    this.#policy = loaded.policy;
    this.#watch(loaded.files);
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
    this.#watch(loaded.files.length > 0 ? loaded.files : this.#watched);
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
    for (const file of this.#watched) unwatchFile(file);
    this.#watched = [];
  }

  /** Watches exactly `files` (the denylist may change with the file). */
  #watch(files: readonly string[]): void {
    for (const file of this.#watched) if (!files.includes(file)) unwatchFile(file);
    for (const file of files) {
      if (this.#watched.includes(file)) continue;
      // A stat poll follows renames and symlink swaps (editors, Kubernetes ConfigMaps), which fs.watch loses.
      watchFile(file, { interval: WATCH_INTERVAL_MS, persistent: false }, () => this.reload("changed"));
    }
    this.#watched = [...files];
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
 * limits). Reloads on SIGHUP too.
 * @throws ConfigError naming each problem, when the file does not fit this service's wallets or coins
 */
export function openAccess(
  config: AppConfig,
  context: AccessContext & { log: Logger; shutdown: Shutdown; observer?: AccessObserver },
): AccessControl | undefined {
  if (config.access === undefined) return undefined;
  const { log, shutdown, observer, ...known } = context;
  const control = new AccessControl(config.access.path, known, log, observer);
  const onHangUp = () => control.reload("SIGHUP");
  process.on("SIGHUP", onHangUp);
  shutdown.push(async () => {
    process.off("SIGHUP", onHangUp);
    control.close();
  });
  return control;
}
