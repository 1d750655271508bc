/**
 * Decision 0003 (docs/decisions/0003-calldata-encoder.md): `TokenSwap.sell`'s calldata by
 * `staticCallEncoder` against ethers' `Interface.encodeFunctionData`, on the same arguments (a
 * different amount each call). Remove the encoder when ethers' costs under 5 µs a call (or when
 * a trade function takes another parameter type: then the encoder refuses to be built).
 * `npm run bench:micro -- calldata`.
 */
import { Interface } from "ethers";

import { compare, costUnder } from "../../shared/micro-bench.js";
import { SWAP_ABI } from "./abi.js";
import { staticCallEncoder } from "./calldata.js";

const STABLE = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

const swap = new Interface(SWAP_ABI);
const encodeSell = staticCallEncoder(swap, "sell");
let amount = 10n ** 18n;
/** sell(stable, amount, destinatary, minimum out, deadline), as the trade adapter passes them. */
const args = () => [STABLE, amount++, CUSTOMER, 990n * 10n ** 6n, 1_900_000_000n] as const;

await compare({
  record: "0003",
  subject: "adapters/chain/tx/calldata.ts",
  loop: 20,
  cases: {
    ethers: { label: "ethers' encodeFunctionData", run: () => swap.encodeFunctionData("sell", args()) },
    ours: { label: "staticCallEncoder", run: () => encodeSell(args()) },
  },
  verdict: ({ ethers }) => costUnder("ethers", ethers, 5_000),
});
