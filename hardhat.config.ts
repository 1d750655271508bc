import { createRequire } from "node:module";

import hardhatToolboxMochaEthers from "@nomicfoundation/hardhat-toolbox-mocha-ethers";
import { configVariable, defineConfig } from "hardhat/config";

// Hardhat cannot download compilers on machines without internet access, so the
// compiler comes from the `solc` npm package pinned in package.json.
const require = createRequire(import.meta.url);
const solc = {
  version: (require("solc/package.json") as { version: string }).version,
  path: require.resolve("solc/soljson.js"),
};

// The two contracts every trade runs (the mocks stand for coins and feeds deployed by others)
// compile through the IR pipeline, optimised for calls rather than size, in every profile: a trade
// costs 1,100 to 2,100 gas less than with the legacy pipeline (docs/gas.md).
const tradedSettings = {
  ...solc,
  settings: { optimizer: { enabled: true, runs: 10_000 }, viaIR: true, evmVersion: "cancun" },
};
const tradedContracts = {
  "contracts/TokenSwap.sol": tradedSettings,
  "contracts/TradedToken.sol": tradedSettings,
};

export default defineConfig({
  plugins: [hardhatToolboxMochaEthers],
  solidity: {
    profiles: {
      default: {
        compilers: [{ ...solc, settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "cancun" } }],
        overrides: tradedContracts,
      },
      production: {
        compilers: [{ ...solc, settings: { optimizer: { enabled: true, runs: 10_000 }, evmVersion: "cancun" } }],
        overrides: tradedContracts,
      },
    },
  },
  networks: {
    // The in-process chain of the tests and of `npm start`. Under automine every transaction
    // is a block, and by default each block's timestamp is one second past the last: a burst of
    // a few hundred trades would run the chain's clock minutes ahead of the wall clock, past
    // the deadlines in the trades' calldata. Blocks of one second share its timestamp instead,
    // as on a real chain.
    default: { type: "edr-simulated", allowBlocksWithSameTimestamp: true },
    // Any node, for `npm run deploy` (scripts/deploy-cli.ts): the URL and the deployer's key are
    // read only when this network is used, from the environment or from Hardhat's encrypted
    // keystore (`npx hardhat keystore set DEPLOYER_PRIVATE_KEY`).
    rpc: {
      type: "http",
      chainType: "l1",
      url: configVariable("DEPLOY_RPC_URL"),
      accounts: [configVariable("DEPLOYER_PRIVATE_KEY")],
    },
  },
  test: {
    mocha: { timeout: 120_000 },
  },
});
