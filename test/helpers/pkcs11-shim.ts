/**
 * A PKCS#11 module of the tests' own in front of SoftHSM (pkcs11-shim/shim.c), for what a real
 * token does and SoftHSM cannot be made to: stop answering in any call, log the application out
 * or close its sessions under it (as an HSM failover would), and tell which calls the signer
 * made. Built here from its source with the machine's gcc (build-essential, which pkcs11js's own
 * install needs too) into this process's temporary directory; a test that needs it is skipped,
 * saying so, only where gcc is missing.
 *
 * Its settings are paths in the environment (inherited by the signer's process and by a service
 * started after them, and read at each call); the faults are files a test creates and removes.
 * `lost`: a call that began while held stays held once released (a request the network lost,
 * which the vendor's library waits for forever): only the calls made after the release answer.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { TestToken } from "./softhsm.js";

const SOURCE = fileURLToPath(new URL("./pkcs11-shim/shim.c", import.meta.url));
/** The OASIS PKCS#11 headers, as pkcs11js ships them. */
const HEADERS = join(dirname(createRequire(import.meta.url).resolve("pkcs11js/package.json")), "includes", "pkcs11");

/** The calls the shim can hold (SHIM_HANG_<NAME>). */
export type HeldCall =
  | "C_OpenSession"
  | "C_CloseSession"
  | "C_Login"
  | "C_FindObjectsInit"
  | "C_FindObjects"
  | "C_FindObjectsFinal"
  | "C_GetAttributeValue"
  | "C_SignInit"
  | "C_Sign";

export interface Shim {
  /** The shim's path: what PKCS11_MODULE names. */
  module: string;
  /** Its settings, for a service started with an environment of its own. */
  env: Record<string, string>;
  /** From now on `call` waits (a token that stops answering; at most `maxHoldMs` when given). */
  hold(call: HeldCall): void;
  /** `call` answers again. */
  release(call: HeldCall): void;
  /** The next C_SignInit logs the application out first, or closes every session of the slot. */
  next(fault: "logout" | "close-all"): void;
  /** The next C_SignInit first changes the user's PIN, in the signer's own process (SoftHSM's other processes would not see it). */
  setPin(from: string, to: string): void;
  /** The calls made so far, each "C_Name 0x<return code>". */
  calls(): string[];
  /** Sessions used by two threads at once (PKCS#11 forbids it), one line each. */
  violations(): string;
  /** Releases every held call and removes its files. */
  remove(): void;
}

let built: string | undefined;

/**
 * The shim in front of `token`'s module, its settings in process.env; skips the calling test
 * (saying why) only where gcc is missing.
 */
export function pkcs11Shim(
  context: Mocha.Context,
  token: TestToken,
  options: { maxHoldMs?: number; lost?: boolean } = {},
): Shim {
  const module = build(context);
  const dir = mkdtempSync(join(tmpdir(), "pkcs11-shim-"));
  const held = (call: HeldCall) => join(dir, `hold-${call}`);
  const env: Record<string, string> = {
    SHIM_REAL: token.module,
    SHIM_TRACE: join(dir, "trace"),
    SHIM_LOG: join(dir, "violations"),
    SHIM_LOGOUT: join(dir, "logout"),
    SHIM_CLOSE_ALL: join(dir, "close-all"),
    SHIM_SET_PIN: join(dir, "set-pin"),
    ...(options.maxHoldMs === undefined ? {} : { SHIM_HANG_MAX_MS: String(options.maxHoldMs) }),
  };
  delete process.env.SHIM_HANG_MAX_MS;
  delete process.env.SHIM_HANG_LOST;
  if (options.lost) env.SHIM_HANG_LOST = "1";
  const calls: HeldCall[] = [
    "C_OpenSession",
    "C_CloseSession",
    "C_Login",
    "C_FindObjectsInit",
    "C_FindObjects",
    "C_FindObjectsFinal",
    "C_GetAttributeValue",
    "C_SignInit",
    "C_Sign",
  ];
  for (const call of calls) env[`SHIM_HANG_${call.toUpperCase()}`] = held(call);
  Object.assign(process.env, env);
  const read = (path: string) => (existsSync(path) ? readFileSync(path, "utf8") : "");
  return {
    module,
    env,
    hold: (call) => writeFileSync(held(call), ""),
    release: (call) => rmSync(held(call), { force: true }),
    next: (fault) => writeFileSync(fault === "logout" ? env.SHIM_LOGOUT! : env.SHIM_CLOSE_ALL!, ""),
    setPin: (from, to) => writeFileSync(env.SHIM_SET_PIN!, `${from}\n${to}\n`, { mode: 0o600 }),
    calls: () => read(env.SHIM_TRACE!).split("\n").filter(Boolean),
    violations: () => read(env.SHIM_LOG!),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function build(context: Mocha.Context): string {
  if (built !== undefined) return built;
  const version = spawnSync("gcc", ["--version"], { encoding: "utf8" });
  if (version.error !== undefined || version.status !== 0) {
    console.log(
      "    (skipped: gcc is missing, and the PKCS#11 shim is built with it: apt-get install -y build-essential)",
    );
    context.skip();
  }
  const out = mkdtempSync(join(tmpdir(), "pkcs11-shim-build-"));
  process.once("exit", () => rmSync(out, { recursive: true, force: true }));
  const library = join(out, "libpkcs11-shim.so");
  const run = spawnSync(
    "gcc",
    ["-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC", "-I", HEADERS, "-o", library, SOURCE, "-ldl"],
    { encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`gcc could not build the PKCS#11 shim:\n${run.stderr}`);
  built = library;
  return library;
}
