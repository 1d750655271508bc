/**
 * Who may call the service, and over what: the api keys (API_KEYS, API_KEYS_FILE, or the access
 * file ACCESS_FILE with what each key may do) and TLS (TLS_CERT, TLS_KEY).
 */
import { hash } from "node:crypto";

import { keyIdOf } from "../../../core/index.js";
import { loadAccessFile } from "../access-file.js";
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

/**
 * ACCESS_FILE, read and checked now (what needs the chain, its wallets and coins, is checked again
 * when the service opens it: adapters/startup/access.ts). With it, API_KEYS and API_KEYS_FILE must
 * be unset: one place says which keys exist.
 */
export function accessFile(e: Env, problems: string[]): AppConfig["access"] {
  if (e.ACCESS_FILE === undefined) return undefined;
  const alsoSet = (["API_KEYS", "API_KEYS_FILE"] as const).filter((name) => e[name] !== undefined);
  if (alsoSet.length > 0)
    problems.push(
      `ACCESS_FILE: lists the api keys, so ${alsoSet.join(" and ")} must be unset (${alsoSet.length > 1 ? "both are" : "it is"} set)`,
    );
  const loaded = loadAccessFile(e.ACCESS_FILE, {});
  problems.push(...loaded.problems.map((problem) => `ACCESS_FILE: ${problem}`));
  return loaded.policy === undefined ? undefined : { path: e.ACCESS_FILE, policy: loaded.policy };
}

/** The ids (idempotency, webhooks) of the configured keys; undefined when none is (dev mode generates one). */
export function knownKeyIds(keys: readonly string[], access: AppConfig["access"]): ReadonlySet<string> | undefined {
  if (access !== undefined) return new Set(access.policy.keys.map((key) => key.id));
  return keys.length === 0 ? undefined : new Set(keys.map((key) => keyIdOf(sha256Hex(key))));
}

function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}
