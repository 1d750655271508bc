/**
 * Where trade events are pushed: WEBHOOKS_FILE, read and checked against the api keys, its three
 * flags, and how long finished events are kept.
 */
import { hash } from "node:crypto";

import { parseWebhooksFile, type WebhookEndpointConfig } from "../webhooks-file.js";
import type { AppConfig } from "./config.js";
import { readFile } from "./files.js";
import type { Env } from "./schema.js";

/** @param keys - the api keys already read: each endpoint must name one of them (none configured: not checked) */
export function webhookSettings(e: Env, keys: readonly string[], problems: string[]): AppConfig["webhooks"] {
  let endpoints: WebhookEndpointConfig[] = [];
  if (e.WEBHOOKS_FILE !== undefined) {
    const text = readFile("WEBHOOKS_FILE", e.WEBHOOKS_FILE, problems);
    // An api key's id is its scope (adapters/transport/request/api-key.ts); with no key configured (dev mode generates one) ids are not checked.
    const knownIds =
      keys.length === 0 ? undefined : new Set(keys.map((key) => hash("sha256", key, "hex").slice(0, 32)));
    if (text !== undefined)
      endpoints = parseWebhooksFile(
        text,
        { allowInsecure: e.WEBHOOK_ALLOW_INSECURE, allowPrivate: e.WEBHOOK_ALLOW_PRIVATE, knownIds },
        problems,
      );
  }
  return {
    endpoints,
    allowInsecure: e.WEBHOOK_ALLOW_INSECURE,
    allowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
    retryWindowMs: e.WEBHOOK_RETRY_WINDOW_MS,
    retentionMs: e.WEBHOOK_RETENTION_DAYS * 86_400_000,
  };
}
