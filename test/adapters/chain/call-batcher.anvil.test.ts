/**
 * The call batcher (adapters/chain/rpc/call-batcher.ts) on Foundry's anvil, an independent node: its
 * state override, its gas accounting and its revert data, against eth_calls of their own
 * (test/helpers/call-batcher-cases.ts, also run on EDR), through the service's own provider.
 */
import { createRpcProvider } from "../../../adapters/chain/index.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { type BatcherChain, callBatcherCases } from "../../helpers/call-batcher-cases.js";

/** Hardhat account #2: the customer. */
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

describe("the call batcher on anvil: the same answers as eth_calls of their own", function () {
  this.timeout(120_000);
  let anvil: Anvil | undefined;
  let chain: BatcherChain | undefined;

  before(async function () {
    anvil = await startAnvil({ blockTime: 1 });
    const addresses = await deployOnAnvil(anvil, 1000);
    chain = {
      provider: createRpcProvider(anvil.url, 31337n),
      addresses,
      exchange: hardhatAccount(1).address,
      customer: CUSTOMER,
    };
  });

  after(async function () {
    chain?.provider.destroy();
    await anvil?.stop();
  });

  callBatcherCases(async () => chain!);
});
