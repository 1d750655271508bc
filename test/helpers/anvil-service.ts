/**
 * The service on anvil as the lifecycle and webhook suites run it: the environment they share
 * (the deployed suite, one exchange wallet, one key, quick timings), the webhooks file naming a
 * test receiver, and `npm start`'s entry point as a process of its own for the suites that run
 * several instances.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Anvil } from "./anvil.js";
import { waitFor } from "./wait.js";
import type { WebhookReceiver } from "./webhook-receiver.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * RPC_URL, DEPLOYMENT_FILE (`<dir>/deployment.json`, which the suite writes), the wallet's key,
 * the api key, any port, and quick timings: a receipt waited for 1 s, no idempotency wait, the
 * monitor looking every 250 ms. Each suite adds what it is about.
 */
export function anvilServiceEnv(anvil: Anvil, dir: string, apiKey: string, privateKey: string): Record<string, string> {
  return {
    RPC_URL: anvil.url,
    DEPLOYMENT_FILE: join(dir, "deployment.json"),
    EXCHANGE_PRIVATE_KEYS: privateKey,
    API_KEYS: apiKey,
    PORT: "0",
    RECEIPT_TIMEOUT_MS: "1000",
    IDEMPOTENCY_WAIT_MS: "0",
    MONITOR_INTERVAL_MS: "250",
  };
}

/** `<dir>/<name>`: the receiver as `apiKey`'s endpoint; the env that points at it and lets it be local. */
export function writeWebhooksFile(
  dir: string,
  apiKey: string,
  receiver: WebhookReceiver,
  name = "webhooks.json",
): Record<string, string> {
  const apiKeyId = createHash("sha256").update(apiKey).digest("hex").slice(0, 32);
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ endpoints: [{ apiKeyId, url: receiver.url, secrets: [receiver.secret] }] }));
  return { WEBHOOKS_FILE: file, WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_ALLOW_PRIVATE: "true" };
}

export interface Instance {
  child: ChildProcess;
  apiUrl: string;
  output: () => string;
}

/** `npm start`'s entry point in production mode, as its own process. */
export async function startInstance(env: Record<string, string>): Promise<Instance> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  await waitFor("the service to start", async () => out.includes("is ready") || child.exitCode !== null);
  const apiUrl = /API: +(http\S+)/.exec(out)?.[1];
  if (!apiUrl) throw new Error(`the service did not start:\n${out}`);
  return { child, apiUrl, output: () => out };
}
