import { readFileSync } from "node:fs";

import { expect } from "chai";

import { ConfigError, loadConfig } from "../../../adapters/config/env.js";

/** Loads `env` and returns the problem about CHAIN_BLOCK_TIME_MS, which must exist. */
function problem(env: NodeJS.ProcessEnv): string {
  let thrown: unknown;
  try {
    loadConfig(env);
  } catch (error) {
    thrown = error;
  }
  expect(thrown, "expected a ConfigError").to.be.instanceOf(ConfigError);
  const found = (thrown as ConfigError).problems.find((p) => p.startsWith("CHAIN_BLOCK_TIME_MS:"));
  expect(found, (thrown as ConfigError).message).to.be.a("string");
  return found!;
}

describe("CHAIN_BLOCK_TIME_MS (interval mining of the embedded chain)", function () {
  it("is unset by default: automine, and no blockTimeMs in the chain configuration", function () {
    expect(loadConfig({}).chain).to.deep.equal({ mode: "embedded", chainPort: 8545 });
    expect(loadConfig({ CHAIN_BLOCK_TIME_MS: "" }).chain).to.deep.equal({ mode: "embedded", chainPort: 8545 });
  });

  it("sets blockTimeMs in milliseconds", function () {
    expect(loadConfig({ CHAIN_BLOCK_TIME_MS: "1000" }).chain).to.deep.equal({
      mode: "embedded",
      chainPort: 8545,
      blockTimeMs: 1000,
    });
    expect(loadConfig({ CHAIN_BLOCK_TIME_MS: "1", CHAIN_PORT: "0" }).chain).to.deep.equal({
      mode: "embedded",
      chainPort: 0,
      blockTimeMs: 1,
    });
  });

  for (const bad of ["0", "-5", "1.5", "1e3", "1s", "3600001", "abc"]) {
    it(`refuses ${JSON.stringify(bad)}, naming the variable`, function () {
      expect(problem({ CHAIN_BLOCK_TIME_MS: bad })).to.include("1 to 3600000");
    });
  }

  it("is refused with RPC_URL (that chain has its own block time) rather than ignored", function () {
    const production = {
      RPC_URL: "http://127.0.0.1:8545",
      DEPLOYMENT_FILE: "deployment.json",
      EXCHANGE_PRIVATE_KEYS: `0x${"11".repeat(32)}`,
      API_KEYS: "an-api-key-0123456789",
    };
    expect(() => loadConfig(production)).not.to.throw();
    expect(problem({ ...production, CHAIN_BLOCK_TIME_MS: "1000" })).to.include("RPC_URL");
  });

  it("is listed in .env.example", function () {
    expect(readFileSync(new URL("../../../.env.example", import.meta.url), "utf8")).to.match(/^CHAIN_BLOCK_TIME_MS=$/m);
  });
});
