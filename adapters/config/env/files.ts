/** Reading a file that a variable names (API_KEYS_FILE, TLS_*, the keystore, WEBHOOKS_FILE) at start. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

/** The file's text, or undefined with a problem naming the variable, the path and the error code (never the content). */
export function readFile(name: string, path: string, problems: string[]): string | undefined {
  try {
    return readFileSync(resolve(path), "utf8");
  } catch (error) {
    problems.push(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    return undefined;
  }
}
