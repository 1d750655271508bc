/**
 * Writes docs/access-file.schema.json, the access file's published JSON Schema, from its
 * definition (adapters/config/access-file.ts), formatted as Biome formats the repository's JSON;
 * a test fails when the committed copy is stale.
 * Usage: node --import tsx scripts/access-schema.ts
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { accessFileJsonSchema } from "../adapters/config/access-file.js";

const path = fileURLToPath(new URL("../docs/access-file.schema.json", import.meta.url));
writeFileSync(path, `${JSON.stringify(accessFileJsonSchema(), null, 2)}\n`);
execFileSync("npx", ["biome", "format", "--write", path], { stdio: "ignore" });
process.stdout.write(`wrote ${path}\n`);
