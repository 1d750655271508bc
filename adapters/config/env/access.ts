/** Who may call the service, and over what: the api keys (API_KEYS, API_KEYS_FILE) and TLS (TLS_CERT, TLS_KEY). */
import type { AppConfig } from "./config.js";
import { readFile } from "./files.js";
import type { Env } from "./schema.js";

/** Shortest accepted API key: long enough that guessing is hopeless. */
export const MIN_API_KEY_LENGTH = 16;

/** Keys from API_KEYS (comma-separated) and API_KEYS_FILE (one per line, # comments), checked. */
export function apiKeys(env: Env, problems: string[]): string[] {
  const keys: string[] = [];
  const check = (name: string, list: string[]) => {
    for (const key of list) {
      if (key.length < MIN_API_KEY_LENGTH) {
        problems.push(`${name}: every key must be at least ${MIN_API_KEY_LENGTH} characters long`);
        return;
      }
      if (/[\s,]/.test(key)) {
        problems.push(`${name}: keys must not contain spaces or commas`);
        return;
      }
    }
    keys.push(...list);
  };
  if (env.API_KEYS !== undefined) {
    check(
      "API_KEYS",
      env.API_KEYS.split(",")
        .map((k) => k.trim())
        .filter((k) => k !== ""),
    );
    if (keys.length === 0 && !problems.some((p) => p.startsWith("API_KEYS:"))) problems.push("API_KEYS: holds no key");
  }
  if (env.API_KEYS_FILE !== undefined) {
    const text = readFile("API_KEYS_FILE", env.API_KEYS_FILE, problems);
    if (text !== undefined) {
      const list = text
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line !== "" && !line.startsWith("#"));
      if (list.length === 0) problems.push("API_KEYS_FILE: holds no key");
      else check("API_KEYS_FILE", list);
    }
  }
  return [...new Set(keys)];
}

/** The certificate and key TLS_CERT and TLS_KEY name (both or neither), read now so that a missing file stops the start. */
export function tlsFiles(e: Env, problems: string[]): AppConfig["tls"] {
  let tls: AppConfig["tls"];
  if ((e.TLS_CERT === undefined) !== (e.TLS_KEY === undefined)) {
    problems.push(
      e.TLS_CERT === undefined
        ? "TLS_CERT: is required when TLS_KEY is set"
        : "TLS_KEY: is required when TLS_CERT is set",
    );
  } else if (e.TLS_CERT !== undefined && e.TLS_KEY !== undefined) {
    const cert = readFile("TLS_CERT", e.TLS_CERT, problems);
    const key = readFile("TLS_KEY", e.TLS_KEY, problems);
    if (cert !== undefined && key !== undefined) tls = { cert: Buffer.from(cert), key: Buffer.from(key) };
  }
  return tls;
}
