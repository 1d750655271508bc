/**
 * The audit step of the composition root: the instance's start and stop recorded in the audit log
 * (its version and a digest of its configuration without secrets), and the chain's head written
 * to the log as a checkpoint at start, every AUDIT_CHECKPOINT_MS and at stop, so that an outside
 * log store holds a witness the service cannot rewrite (`npm run audit -- verify --head`).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Logger } from "pino";

import { type AuditEntry, type AuditLog, SERVICE_ACTOR } from "../../core/index.js";
import type { AppConfig } from "../config/env.js";
import { canonicalJson } from "../journal/index.js";
import type { Shutdown } from "./shutdown.js";

/** This service's version: package.json's, found above this file (from the sources or the build). */
export function serviceVersion(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const found = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (found.name === "token-trading-service" && found.version !== undefined) return found.version;
    }
    if (dirname(dir) === dir) return "unknown";
  }
}

/** A URL's scheme, host and port only: its user, password, path and query may hold a key. */
function origin(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.hostname}${parsed.port === "" ? "" : `:${parsed.port}`}`;
  } catch {
    return "unparsable";
  }
}

/**
 * The configuration as its digest covers it: every setting but the secrets, which are left out
 * (the api keys and the wallets' keys counted, the keystore's password and contents, the TLS key,
 * the webhooks' secrets, and every URL cut to its scheme, host and port, since a user, password,
 * path or query may carry a key). The access file is its own record (access.loaded).
 */
export function publicConfig(config: AppConfig): unknown {
  const { apiKeys, access, tls, journal, webhooks, chain, ...rest } = config;
  const chainView =
    chain.mode === "embedded"
      ? chain
      : {
          ...chain,
          rpcUrl: origin(chain.rpcUrl),
          rpcUrls: chain.rpcUrls.map(origin),
          privateKeys: chain.privateKeys.length,
          keystore: chain.keystore?.files.map((file) => file.path),
        };
  const view = {
    ...rest,
    apiKeys: apiKeys.length,
    accessFile: access?.path ?? null,
    tlsCert: tls === undefined ? null : createHash("sha256").update(tls.cert).digest("hex"),
    journal: { dataDir: journal.dataDir, url: journal.url === undefined ? null : origin(journal.url) },
    webhooks: {
      ...webhooks,
      endpoints: webhooks.endpoints.map((endpoint) => ({
        apiKeyId: endpoint.apiKeyId,
        url: origin(String(endpoint.url)),
      })),
    },
    chain: chainView,
  };
  // Amounts are bigints, which JSON has no form for: as decimal text.
  return JSON.parse(JSON.stringify(view, (_key, value: unknown) => (typeof value === "bigint" ? `${value}` : value)));
}

/** SHA-256 of the canonical JSON of the configuration without its secrets (publicConfig). */
export function configDigest(config: AppConfig): string {
  return createHash("sha256")
    .update(canonicalJson(publicConfig(config)))
    .digest("hex");
}

/** What the start and the stop records say of this instance. */
function serviceEntry(
  action: "service.started" | "service.stopped",
  config: AppConfig,
  instanceId: string,
): AuditEntry {
  return {
    actor: SERVICE_ACTOR,
    action,
    subject: instanceId,
    details: { version: serviceVersion(), configDigest: configDigest(config), node: process.version },
  };
}

/**
 * Set up once the journal is open, so that its stop is recorded after everything opened later has
 * closed (the API drained, trades in flight finished) and before the journal closes. `started`
 * records the start once the whole service is up; a start that fails before records neither.
 */
export function startAudit(
  config: AppConfig,
  audit: AuditLog,
  context: { instanceId: string; log: Logger; shutdown: Shutdown },
): { started(): Promise<void> } {
  const { instanceId, log, shutdown } = context;
  const checkpoint = async () => {
    const head = await audit.auditHead();
    log.info({ seq: head.seq, hash: head.hash }, "audit checkpoint");
  };
  let timer: NodeJS.Timeout | undefined;
  shutdown.push(async () => {
    if (timer === undefined) return;
    clearInterval(timer);
    await audit.appendAudit(serviceEntry("service.stopped", config, instanceId));
    await checkpoint();
  });
  return {
    started: async () => {
      await audit.appendAudit(serviceEntry("service.started", config, instanceId));
      await checkpoint();
      timer = setInterval(() => {
        checkpoint().catch((error: unknown) => log.warn({ err: error }, "could not read the audit log's head"));
      }, config.auditCheckpointMs);
      timer.unref();
    },
  };
}
