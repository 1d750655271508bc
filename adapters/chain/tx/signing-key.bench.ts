/**
 * Decision 0001 (docs/decisions/0001-wasm-signing-key.md): one signature of a 32-byte digest by
 * `WasmSigningKey.sign` (libsecp256k1 as WebAssembly) against ethers' own `SigningKey.sign`
 * (noble-curves), with the same key over the same digests. Remove the key when ethers' costs at
 * most 1.2 times this one. `npm run bench:micro -- signing-key`.
 */
import { SigningKey, keccak256, toUtf8Bytes } from "ethers";

import { compare, ratioAtMost } from "../../shared/micro-bench.js";
import { WasmSigningKey } from "./signing-key.js";

const PRIVATE_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
/** Digests as a transaction's are: keccak-256 outputs, a different one each call. */
const DIGESTS = Array.from({ length: 256 }, (_, i) => keccak256(toUtf8Bytes(`digest ${i}`)));

const ethersKey = new SigningKey(PRIVATE_KEY);
const wasmKey = new WasmSigningKey(PRIVATE_KEY);
let next = 0;
const digest = () => DIGESTS[next++ & 255]!;

await compare({
  record: "0001",
  subject: "adapters/chain/tx/signing-key.ts",
  cases: {
    ethers: { label: "ethers' SigningKey.sign", run: () => ethersKey.sign(digest()) },
    ours: { label: "WasmSigningKey.sign", run: () => wasmKey.sign(digest()) },
  },
  verdict: ({ ethers, ours }) => ratioAtMost("ethers", ethers, ours, 1.2),
});
