/**
 * Where trade events are pushed: WEBHOOKS_FILE, read and checked against the api keys, its three
 * flags, and how long finished events are kept.
 */
import { parseWebhooksFile, type WebhookEndpointConfig } from "../webhooks-file.js";
import type { AppConfig } from "./config.js";
import { readFile } from "./files.js";
import type { Env } from "./schema.js";

/**
 * @param knownIds - the ids of the api keys already read (API_KEYS, API_KEYS_FILE or ACCESS_FILE): each
 *   endpoint must name one of them; undefined when none is configured (dev mode generates one): not checked
 */
export function webhookSettings(
  e: Env,
  knownIds: ReadonlySet<string> | undefined,
  problems: string[],
): AppConfig["webhooks"] {
  let endpoints: WebhookEndpointConfig[] = [];
  if (e.WEBHOOKS_FILE !== undefined) {
    const text = readFile("WEBHOOKS_FILE", e.WEBHOOKS_FILE, problems);
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
