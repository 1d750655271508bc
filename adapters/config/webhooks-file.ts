/**
 * WEBHOOKS_FILE: the webhook endpoint of each api key that has one. A JSON file:
 *
 *   { "endpoints": [
 *       { "apiKeyId": "<32 hex digits>", "url": "https://hooks.example.com/trades",
 *         "secrets": ["whsec_<base64>"] } ] }
 *
 * An api key's id is its scope: the first 16 bytes of the key's SHA-256, in hex
 * (`printf %s "$KEY" | sha256sum | cut -c1-32`), so the file names keys without holding them.
 * Two secrets during a rotation. Problems are named by entry, never echoing a secret.
 */
import { isIP } from "node:net";

import { isInternalAddress, urlHost } from "../webhooks/destination.js";
import { WebhookSecret } from "../webhooks/signature.js";

export interface WebhookEndpointConfig {
  apiKeyId: string;
  url: URL;
  secrets: WebhookSecret[];
}

const API_KEY_ID = /^[0-9a-f]{32}$/;

/**
 * @param knownIds - the ids of the configured api keys; an entry naming another is a problem (none: not checked)
 */
export function parseWebhooksFile(
  text: string,
  options: { allowInsecure: boolean; allowPrivate: boolean; knownIds: ReadonlySet<string> | undefined },
  problems: string[],
): WebhookEndpointConfig[] {
  const problem = (message: string) => problems.push(`WEBHOOKS_FILE: ${message}`);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    problem("is not valid JSON");
    return [];
  }
  const entries = (document as { endpoints?: unknown } | null)?.endpoints;
  if (!Array.isArray(entries)) {
    problem('must be a JSON object with an "endpoints" array');
    return [];
  }
  const endpoints: WebhookEndpointConfig[] = [];
  const seen = new Set<string>();
  entries.forEach((entry: unknown, index) => {
    const at = `endpoints[${index}]`;
    const { apiKeyId, url, secrets } = (entry ?? {}) as { apiKeyId?: unknown; url?: unknown; secrets?: unknown };
    const before = problems.length;
    if (typeof apiKeyId !== "string" || !API_KEY_ID.test(apiKeyId)) {
      problem(`${at}.apiKeyId: must be an api key's id, the first 32 hex digits (lower-case) of its SHA-256`);
    } else if (seen.has(apiKeyId)) {
      problem(`${at}.apiKeyId: names the same api key as an earlier entry (one endpoint per key)`);
    } else if (options.knownIds !== undefined && !options.knownIds.has(apiKeyId)) {
      problem(
        `${at}.apiKeyId: ${apiKeyId} is the id of none of the configured api keys (API_KEYS, API_KEYS_FILE or ACCESS_FILE)`,
      );
    }
    let parsed: URL | undefined;
    try {
      parsed = typeof url === "string" ? new URL(url) : undefined;
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) {
      problem(`${at}.url: must be an https:// URL`);
    } else if (parsed.protocol === "http:" && !options.allowInsecure) {
      problem(`${at}.url: must be https:// (http:// only with WEBHOOK_ALLOW_INSECURE=true)`);
    } else if (parsed.username !== "" || parsed.password !== "") {
      problem(`${at}.url: must not hold a user name or password`);
    } else if (isIP(urlHost(parsed)) !== 0 && isInternalAddress(urlHost(parsed)) && !options.allowPrivate) {
      problem(`${at}.url: is a loopback, private or link-local address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)`);
    }
    const keys: WebhookSecret[] = [];
    if (!Array.isArray(secrets) || secrets.length < 1 || secrets.length > 2) {
      problem(`${at}.secrets: must list one or two secrets (two during a rotation)`);
    } else {
      secrets.forEach((secret: unknown, i) => {
        try {
          if (typeof secret !== "string") throw new Error("must be a string");
          keys.push(WebhookSecret.parse(secret));
        } catch (error) {
          problem(`${at}.secrets[${i}]: ${(error as Error).message}`);
        }
      });
    }
    if (problems.length === before && typeof apiKeyId === "string" && parsed !== undefined) {
      seen.add(apiKeyId);
      endpoints.push({ apiKeyId, url: parsed, secrets: keys });
    }
  });
  return endpoints;
}
