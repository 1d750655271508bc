/**
 * A sell counts against the spending limits at what it paid, once mined. It is held to its proven
 * payout when it is admitted, but the swap pays at the price of the block it is mined in: here the
 * token's feed rises between the proof and the block (anyone may post on the mock feed; on a real
 * chain, the oracle's next round), so the sell pays more than the room it was admitted into. The
 * service as an operator runs it (RPC_URL, DEPLOYMENT_FILE, an access file, metrics and access
 * logs on), on anvil, whose mining the test holds back while the sell waits in the pool.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { Interface, JsonRpcProvider, Wallet } from "ethers";

import { startService, type RunningService } from "../../../adapters/main.js";
import { EXCHANGE_ACCOUNT, hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { erc20 } from "./chain-helpers.js";
import { postJson } from "./helpers.js";

const KEY = "desk-key-0123456789abcdefgh";
const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const WALLET = hardhatAccount(EXCHANGE_ACCOUNT);
const DAI_UNIT = 10n ** 18n;

describe("a sell counted at what it paid once mined (anvil)", function () {
  this.timeout(300_000);
  let anvil: Anvil | undefined;
  let service: RunningService | undefined;
  let provider: JsonRpcProvider | undefined;
  let dir: string | undefined;

  after(async function () {
    provider?.destroy();
    await service?.close();
    await anvil?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("counts the payout of a price rise between proof and block, so the next trade is refused", async function () {
    anvil = await startAnvil();
    const addresses = await deployOnAnvil(anvil, 0);
    await anvil.rpc("evm_setAutomine", [true]);
    dir = mkdtempSync(join(tmpdir(), "sell-payout-"));
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const DAI = addresses.stableCoins.DAI!;
    writeFileSync(
      join(dir, "access.json"),
      JSON.stringify({
        keys: [{ name: "desk", sha256: sha(KEY), roles: ["trader"] }],
        // A sell of 10 tokens at 1.25 USD is proven at 12.5 DAI: under the cap of 13.
        limits: [{ name: "desk-daily", per: "key", window: "24h", maxUsd: "13" }],
      }),
    );
    service = await startService({
      env: {
        RPC_URL: anvil.url,
        DEPLOYMENT_FILE: join(dir, "deployment.json"),
        EXCHANGE_PRIVATE_KEYS: WALLET.privateKey,
        ACCESS_FILE: join(dir, "access.json"),
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: mkdtempSync(join(dir, "data-")),
      },
      log: defaultLog(),
      rootDir: dir,
    });
    provider = new JsonRpcProvider(anvil.url, undefined, { staticNetwork: true, cacheTimeout: -1 });
    const dai = erc20(DAI, provider);
    const before = await dai.balanceOf(CUSTOMER);

    await anvil.rpc("evm_setAutomine", [false]);
    const mined = await provider.getTransactionCount(WALLET.address, "latest");
    const sell = postJson(
      `${service.apiUrl}/api/v1/token/sell`,
      { userAddress: WALLET.address, destinatary: CUSTOMER, amount: "10", usdAddress: DAI },
      { apiKey: KEY },
    );
    // Proven, counted at 12.5, signed and sent: in the pool.
    await waitFor(
      "the sell in anvil's pool",
      async () => (await provider!.getTransactionCount(WALLET.address, "pending")) > mined,
      60_000,
      50,
    );
    // The feed moves to 1.50, with a higher tip, so the block orders the update first.
    const feed = new Interface(["function updateAnswer(int256)", "function decimals() view returns (uint8)"]);
    const [decimals] = feed.decodeFunctionResult(
      "decimals",
      await provider.call({ to: addresses.feeds.tokenUsd, data: feed.encodeFunctionData("decimals") }),
    );
    const poster = new Wallet(hardhatAccount(9).privateKey, provider);
    await poster.sendTransaction({
      to: addresses.feeds.tokenUsd,
      data: feed.encodeFunctionData("updateAnswer", [15n * 10n ** (BigInt(decimals) - 1n)]),
      maxPriorityFeePerGas: 100n * 10n ** 9n,
      maxFeePerGas: 500n * 10n ** 9n,
    });
    await anvil.rpc("evm_mine", []);
    await anvil.rpc("evm_setAutomine", [true]);

    const answer = await sell;
    expect(answer.status, answer.text).to.equal(200);
    // It paid what the block's price says: 15 DAI, 2 over the limit's room.
    expect((await dai.balanceOf(CUSTOMER)) - before).to.equal(15n * DAI_UNIT);

    // Counted at 12.5, a buy of 0.5 would fit (13 of 13); counted at 15, it does not.
    const nonce = await provider.getTransactionCount(WALLET.address, "pending");
    const buy = await postJson(
      `${service.apiUrl}/api/v1/token/buy`,
      { userAddress: WALLET.address, destinatary: CUSTOMER, amount: "0.5", usdAddress: DAI },
      { apiKey: KEY },
    );
    expect(buy.status, buy.text).to.equal(429);
    expect(buy.body).to.deep.include({ code: "resource_exhausted" });
    expect(buy.text).to.include('spending limit \\"desk-daily\\"');
    expect(buy.text).to.include("15 of 13 USD used, this trade counts 0.5 USD");
    expect(await provider.getTransactionCount(WALLET.address, "pending")).to.equal(nonce);

    // What the operator sees: the limit's highest use above its maximum, 15 / 13 (to 6 digits).
    const metrics = await (await fetch(service.metricsUrl!)).text();
    const line = metrics
      .split("\n")
      .find((l) => l.startsWith('token_service_spending_limit_highest_use_ratio{limit="desk-daily",measure="usd"}'));
    expect(line, metrics).to.not.equal(undefined);
    expect(line!.split(" ").at(-1)).to.equal("1.153846");
  });
});
