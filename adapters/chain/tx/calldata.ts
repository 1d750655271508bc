/**
 * Calldata for functions whose parameters are all `address` or `uint256`: the 4-byte
 * selector, then one 32-byte word per argument. That is the whole ABI encoding of such a
 * call, so it is written directly, instead of through ethers' Interface.encodeFunctionData,
 * which walks its coder tree on every call of every trade. test/adapters/chain/calldata.test.ts
 * checks that both encodings are the same bytes; docs/decisions/0003-calldata-encoder.md has
 * the measurements.
 */
import { type Interface, MaxUint256 } from "ethers";

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const ADDRESS_PAD = "0".repeat(24);

export type StaticArg = string | bigint;

/**
 * An encoder for `name` of `iface`. Throws at once if the function takes any other type
 * (a change to the ABI must not silently produce wrong calldata).
 */
export function staticCallEncoder(iface: Interface, name: string): (args: readonly StaticArg[]) => string {
  const fragment = iface.getFunction(name);
  if (!fragment) throw new TypeError(`${name}: not in the ABI`);
  const types = fragment.inputs.map((input) => input.type);
  for (const type of types) {
    if (type !== "address" && type !== "uint256")
      throw new TypeError(`${fragment.format()}: ${type} is not a static address or uint256 parameter`);
  }
  const selector = fragment.selector;
  return (args) => {
    if (args.length !== types.length)
      throw new TypeError(`${fragment.name}: expected ${types.length} arguments, got ${args.length}`);
    let data = selector;
    for (let i = 0; i < types.length; i++) {
      const arg = args[i]!;
      if (types[i] === "address") {
        if (typeof arg !== "string" || !ADDRESS.test(arg))
          throw new TypeError(`${fragment.name}: argument ${i} is not an address`);
        data += ADDRESS_PAD + arg.slice(2).toLowerCase();
      } else {
        if (typeof arg !== "bigint" || arg < 0n || arg > MaxUint256)
          throw new RangeError(`${fragment.name}: argument ${i} is not a uint256`);
        data += arg.toString(16).padStart(64, "0");
      }
    }
    return data;
  };
}
