/**
 * Decision 0002 (docs/decisions/0002-eip1559-serialization.md): signing a sell's type-2
 * transaction and taking its hash, by `signEip1559` against ethers' `Wallet.signTransaction`
 * plus `keccak256` of its result, both with the same `WasmSigningKey` (decision 0001), so that
 * only the encoding differs. Remove the encoder when ethers' path costs at most 1.2 times this
 * one (or when the service needs a transaction type it does not write: not measured here).
 * `npm run bench:micro -- eip1559`.
 */
import { Interface, Wallet, keccak256 } from "ethers";

import { compare, ratioAtMost } from "../../shared/micro-bench.js";
import { SWAP_ABI } from "./abi.js";
import { signEip1559 } from "./eip1559.js";
import { WasmSigningKey } from "./signing-key.js";

const PRIVATE_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const SWAP = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const STABLE = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

/** A sell as the service sends it: TokenSwap.sell's calldata, fees of a busy L1, a fresh nonce each time. */
const DATA = new Interface(SWAP_ABI).encodeFunctionData("sell", [
  STABLE,
  1_000n * 10n ** 18n,
  CUSTOMER,
  990n * 10n ** 6n,
  1_900_000_000n,
]);
let nonce = 0;
const sell = () => ({
  chainId: 1n,
  nonce: nonce++,
  maxPriorityFeePerGas: 1_500_000_000n,
  maxFeePerGas: 42_000_000_000n,
  gasLimit: 180_000n,
  to: SWAP,
  value: 0n,
  data: DATA,
});

const key = new WasmSigningKey(PRIVATE_KEY);
const wallet = new Wallet(key);

await compare({
  record: "0002",
  subject: "adapters/chain/tx/eip1559.ts",
  cases: {
    ethers: {
      label: "ethers' Wallet.signTransaction + keccak256",
      run: async () => keccak256(await wallet.signTransaction({ ...sell(), type: 2 })),
    },
    ours: { label: "signEip1559", run: () => signEip1559(key, sell()).txHash },
  },
  verdict: ({ ethers, ours }) => ratioAtMost("ethers", ethers, ours, 1.2),
});
