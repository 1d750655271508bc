/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 with the
 * endpoint's secret over `${webhook-id}.${webhook-timestamp}.${body}`, sent as `v1,<base64>`.
 * During a rotation an endpoint has two secrets and each message carries both signatures,
 * separated by a space, so a receiver with either secret accepts it.
 */
import { createHmac } from "node:crypto";
import { inspect } from "node:util";

const PREFIX = "whsec_";

/** Shortest accepted secret: the spec's 24 bytes. */
export const MIN_SECRET_BYTES = 24;
/** Longest accepted secret: the spec's 64 bytes. */
export const MAX_SECRET_BYTES = 64;

/** An endpoint's secret. Printing, logging or serialising it shows no byte of it. */
export class WebhookSecret {
  readonly #key: Buffer;

  private constructor(key: Buffer) {
    this.#key = key;
  }

  /**
   * `whsec_` followed by the secret in base64.
   * @throws Error saying what is wrong, never echoing the value
   */
  static parse(text: string): WebhookSecret {
    if (!text.startsWith(PREFIX)) throw new Error(`must start with ${PREFIX}`);
    const base64 = text.slice(PREFIX.length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0)
      throw new Error(`must be ${PREFIX} followed by base64`);
    const key = Buffer.from(base64, "base64");
    if (key.length < MIN_SECRET_BYTES || key.length > MAX_SECRET_BYTES)
      throw new Error(`must hold ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`);
    return new WebhookSecret(key);
  }

  /** `v1,<base64 HMAC-SHA256>` of the signed content. */
  sign(content: string): string {
    return `v1,${createHmac("sha256", this.#key).update(content).digest("base64")}`;
  }

  toJSON(): string {
    return `${PREFIX}[redacted]`;
  }

  toString(): string {
    return `${PREFIX}[redacted]`;
  }

  [inspect.custom](): string {
    return `WebhookSecret(${PREFIX}[redacted])`;
  }
}

/** The `webhook-signature` header: one signature per secret, space-separated. */
export function signWebhook(secrets: readonly WebhookSecret[], id: string, timestampS: number, body: string): string {
  const content = `${id}.${timestampS}.${body}`;
  return secrets.map((secret) => secret.sign(content)).join(" ");
}
