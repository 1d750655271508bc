/**
 * The access step of the composition root: ACCESS_FILE, checked against this service's wallets and
 * stable coins, kept in force, and read again when it (or its denylist) changes and on SIGHUP. A
 * new file with a problem is refused whole: the one in force stays, the refusal is logged as an
 * error and counted, never dropped to "no policy". The transports and the use cases read
 * `current()` on every request, so a removed or expired key is refused on its next one; trades
 * already past their authorize step finish.
 *
 * With the audit log, each load is recorded before it is in force (access.loaded at start,
 * access.reloaded with the keys and limits added, removed and changed, access.refused for a file
 * refused): a reload whose record cannot be written is not put in force (the next change or
 * SIGHUP tries again), and a start whose record cannot be written fails.
 */
import type { EventEmitter } from "node:events";
import { stat } from "node:fs/promises";

import type { Logger } from "pino";

import {
  type AccessKey,
  type AccessPolicy,
  type ApprovalRule,
  type AuditEntry,
  type AuditLog,
  keyIdOf,
  SERVICE_ACTOR,
  watchesEverything,
} from "../../core/index.js";
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
  readonly #audit: AuditLog | undefined;
  #policy: AccessPolicy;
  /** The files the policy in force (or the last refused one) was read from, as they were then. */
  #read: ReadFile[] = [];
  #poll: NodeJS.Timeout | undefined;
  #looking = false;
  /** The reload under way: reloads run one after the other, so their records are in their order. */
  #reloading: Promise<unknown> = Promise.resolve();

  /** What this service needs of every file beyond its own checks: a problem with `policy`, or undefined. */
  readonly #needs: ((policy: AccessPolicy) => string | undefined) | undefined;

  constructor(
    path: string,
    context: AccessContext,
    log: Logger,
    observer?: AccessObserver,
    audit?: AuditLog,
    needs?: (policy: AccessPolicy) => string | undefined,
  ) {
    this.#needs = needs;
    this.#path = path;
    this.#context = context;
    this.#log = log;
    this.#observer = observer;
    this.#audit = audit;
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
      {
        version: loaded.policy.version,
        keys: loaded.policy.keys.length,
        limits: loaded.policy.limits.length,
        approvals: loaded.policy.approvals?.length ?? 0,
      },
      "access file loaded",
    );
  }

  /** The policy in force. */
  readonly current = (): AccessPolicy => this.#policy;

  /** Records the policy loaded at start (access.loaded). */
  async recordLoaded(): Promise<void> {
    const policy = this.#policy;
    await this.#audit?.appendAudit(
      accessEntry("access.loaded", policy, {
        keys: policy.keys.map((key) => key.name),
        limits: policy.limits.map((limit) => limit.name),
        approvals: (policy.approvals ?? []).map((rule) => rule.name),
        denylisted: policy.denylist.size,
      }),
    );
  }

  /**
   * Reads the file again; the new policy is in force once its record is written, when it is valid
   * and differs. Resolves whether the file was taken (false: refused, or its record not written).
   */
  reload(reason: string): Promise<boolean> {
    const next = this.#reloading.then(() => this.#reload(reason));
    this.#reloading = next.catch(() => {});
    return next;
  }

  async #reload(reason: string): Promise<boolean> {
    const loaded = loadAccessFile(this.#path, this.#context);
    if (loaded.files.length > 0) this.#read = loaded.files;
    const needed = loaded.policy === undefined ? undefined : this.#needs?.(loaded.policy);
    if (loaded.policy === undefined || needed !== undefined) {
      const problems = needed === undefined ? loaded.problems : [needed];
      this.#observer?.refused(new Date());
      this.#log.error(
        { reason, problems, version: this.#policy.version },
        "access file refused: the one in force stays",
      );
      await this.#record(
        accessEntry("access.refused", this.#policy, { reason, problems }),
        "access file refused, and its audit record could not be written",
      );
      return false;
    }
    if (loaded.policy.version === this.#policy.version) return true;
    const before = this.#policy;
    const changed = changes(before, loaded.policy);
    const entry = accessEntry("access.reloaded", loaded.policy, { reason, previous: before.version, ...changed });
    if (!(await this.#record(entry, "access file not reloaded: its audit record could not be written"))) return false;
    this.#policy = loaded.policy;
    this.#observer?.loaded(loaded.policy, new Date());
    this.#log.info({ reason, version: loaded.policy.version, ...changed }, "access file reloaded");
    return true;
  }

  /** Appends `entry`; false (logged as `failure`) when it cannot be written. */
  async #record(entry: AuditEntry, failure: string): Promise<boolean> {
    try {
      await this.#audit?.appendAudit(entry);
      return true;
    } catch (error) {
      this.#log.error({ err: error, version: this.#policy.version }, failure);
      return false;
    }
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
      await this.reload("changed");
      // A file that could not be read at all (gone, no permission) is looked at again only once it changes again.
      if (this.#read === read) this.#read = read.map((file, i) => ({ path: file.path, stamp: now[i]! }));
    } finally {
      this.#looking = false;
    }
  }
}

/** An access record: by the service, its subject the file's digest (the policy's version). */
function accessEntry(action: AuditEntry["action"], policy: AccessPolicy, details: AuditEntry["details"]): AuditEntry {
  return { actor: SERVICE_ACTOR, action, subject: policy.version, details };
}

/** An entry's settings as comparable text: sets sorted, bigints as decimals. */
function shape(entry: AccessKey | AccessPolicy["limits"][number] | ApprovalRule): string {
  return JSON.stringify(entry, (_key, value: unknown) =>
    value instanceof Set ? [...value].sort() : typeof value === "bigint" ? `${value}` : value,
  );
}

/** What a reload changed, by name: keys and limits added, removed and changed; denylist entries added and removed. */
function changes(before: AccessPolicy, after: AccessPolicy) {
  const diff = (a: readonly { name: string }[], b: readonly { name: string }[]) => {
    const names = new Set(a.map((x) => x.name));
    return b.filter((x) => !names.has(x.name)).map((x) => x.name);
  };
  const changed = <T extends AccessKey | AccessPolicy["limits"][number] | ApprovalRule>(
    a: readonly T[],
    b: readonly T[],
  ) => {
    const old = new Map(a.map((x) => [x.name, shape(x)]));
    return b.filter((x) => old.has(x.name) && old.get(x.name) !== shape(x)).map((x) => x.name);
  };
  return {
    keysAdded: diff(before.keys, after.keys),
    keysRemoved: diff(after.keys, before.keys),
    keysChanged: changed(before.keys, after.keys),
    limitsAdded: diff(before.limits, after.limits),
    limitsRemoved: diff(after.limits, before.limits),
    limitsChanged: changed(before.limits, after.limits),
    approvalsAdded: diff(before.approvals ?? [], after.approvals ?? []),
    approvalsRemoved: diff(after.approvals ?? [], before.approvals ?? []),
    approvalsChanged: changed(before.approvals ?? [], after.approvals ?? []),
    denylisted: after.denylist.size,
    denylistAdded: [...after.denylist].filter((address) => !before.denylist.has(address)).length,
    denylistRemoved: [...before.denylist].filter((address) => !after.denylist.has(address)).length,
  };
}

/**
 * The access control of ACCESS_FILE, or undefined without it (every key a trader with no
 * limits), its load recorded in the audit log when there is one. Reloads on SIGHUP too
 * (`hangUps`: where SIGHUP is heard, the process; a test gives an emitter of its own, so that its
 * process's signal handling stays as it was).
 * @throws ConfigError naming each problem, when the file does not fit this service's wallets or coins
 */
export async function openAccess(
  config: AppConfig,
  context: AccessContext & {
    log: Logger;
    shutdown: Shutdown;
    observer?: AccessObserver;
    audit?: AuditLog;
    hangUps?: EventEmitter;
  },
): Promise<AccessControl | undefined> {
  if (config.access === undefined) return undefined;
  const { log, shutdown, observer, audit, hangUps = process, ...known } = context;
  // A paused wallet is resumed by an admin only: under OUTSIDE_TX_POLICY=pause no reload may leave none.
  const needs =
    config.watch.policy === "pause"
      ? (policy: AccessPolicy) =>
          policy.keys.some(
            (key) => key.roles.has("admin") && !(key.expiresAt !== undefined && key.expiresAt <= Date.now()),
          )
            ? undefined
            : "keys: OUTSIDE_TX_POLICY=pause needs a key with the admin role that has not expired, to resume a paused wallet (POST /api/v1/wallets/{address}/resume)"
      : undefined;
  const control = new AccessControl(config.access.path, known, log, observer, audit, needs);
  const onHangUp = () => void control.reload("SIGHUP");
  hangUps.on("SIGHUP", onHangUp);
  shutdown.push(async () => {
    hangUps.off("SIGHUP", onHangUp);
    control.close();
  });
  await control.recordLoaded();
  return control;
}

/**
 * The scopes (key ids) of the keys that see every trade, an admin or `sees: ["*"]`, under each of
 * their hashes (a rotation), but those expired: their webhook endpoints also get the events about
 * the wallets and the swap.
 */
export function watcherScopes(policy: AccessPolicy): string[] {
  const now = Date.now();
  return policy.keys
    .filter((key) => watchesEverything(key) && (key.expiresAt === undefined || key.expiresAt > now))
    .flatMap((key) => [key.id, ...key.sha256.map(keyIdOf)]);
}
