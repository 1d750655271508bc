/**
 * Two service processes on one PostgreSQL journal and one wallet, on anvil: exactly one of
 * them monitors the wallet (it holds the lease), and when it is killed with SIGKILL while a
 * trade of the wallet needs sending again, the other takes the wallet over and sees the trade
 * through.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import pg from "pg";

import { hardhatAccount } from "../../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../../helpers/anvil.js";
import { anvilServiceEnv, startInstance, type Instance } from "../../../helpers/anvil-service.js";
import { startPostgres, type TestPostgres } from "../../../helpers/postgres.js";
import { freePort } from "../../../helpers/service-defaults.js";
import { postJson } from "../../transport/helpers.js";
import { waitFor } from "../../../helpers/wait.js";

const KEY = "takeover-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("two instances on one PostgreSQL journal (anvil)", function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let postgres: TestPostgres;
  let dir: string;
  const instances: Instance[] = [];

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "takeover-"));
    [anvil, postgres] = await Promise.all([startAnvil({ blockTime: 1 }), startPostgres()]);
    const addresses = await deployOnAnvil(anvil, 1000);
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const env = {
      ...anvilServiceEnv(anvil, dir, KEY, EXCHANGE.privateKey),
      JOURNAL_URL: postgres.url,
      MONITOR_LEASE_MS: "2000",
    };
    for (let i = 0; i < 2; i++) instances.push(await startInstance({ ...env, METRICS_PORT: String(await freePort()) }));
    sell.usdc = addresses.stableCoins.USDC;
  });

  after(async function () {
    for (const instance of instances) instance.child.kill("SIGKILL");
    await anvil?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const sell = Object.assign(
    (instance: Instance, key: string) =>
      postJson(
        `${instance.apiUrl}/api/v1/token/sell`,
        { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "1", usdAddress: sell.usdc },
        { apiKey: KEY, headers: { "idempotency-key": key } },
      ),
    { usdc: "" },
  );

  async function leaseHolder(): Promise<string | undefined> {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ holder: string }>(
        "SELECT holder FROM leases WHERE name = $1 AND expires_at > clock_timestamp()",
        [`monitor:${EXCHANGE.address.toLowerCase()}`],
      );
      return rows[0]?.holder;
    } finally {
      await client.end();
    }
  }

  it("lets exactly one monitor the wallet, and the other take over when it is killed", async function () {
    const nonce = async () => Number(await anvil.rpc<string>("eth_getTransactionCount", [EXCHANGE.address, "latest"]));
    const before = await nonce();
    await anvil.rpc("evm_setAutomine", [false]);
    await anvil.rpc("evm_setIntervalMining", [0]);
    const pending = await sell(instances[0]!, "takeover-1");
    expect(pending.status, pending.text).to.equal(504);
    const hash = /transaction (0x[0-9a-f]{64})/.exec(pending.body.message)![1]!;

    // One instance holds the wallet's lease; its process id is in the holder's name.
    const holder = await waitFor("a lease holder", leaseHolder, 10_000);
    const monitoring = instances.find((instance) => holder.includes(`:${instance.child.pid}:`))!;
    const survivor = instances.find((instance) => instance !== monitoring)!;
    expect(monitoring, `holder ${holder}`).to.not.equal(undefined);
    await sleep(1_000);
    expect(await leaseHolder(), "the lease changed hands while its holder lived").to.equal(holder);

    // The instance that would send it again dies, then the node forgets the trade (in this
    // order, so that the dying instance cannot send it again in between).
    const exited = new Promise((resolve) => monitoring.child.once("exit", resolve));
    monitoring.child.kill("SIGKILL");
    await exited;
    await anvil.rpc("anvil_dropTransaction", [hash]);
    await anvil.rpc("evm_setIntervalMining", [1]);

    const taken = await waitFor("the survivor to take the lease", async () => {
      const now = await leaseHolder();
      return now !== undefined && now !== holder ? now : undefined;
    });
    expect(taken).to.include(`:${survivor.child.pid}:`);
    const done = await waitFor("the trade's outcome", async () => {
      const answer = await sell(survivor, "takeover-1");
      return answer.status === 504 ? undefined : answer;
    });
    expect(done.status, done.text).to.equal(200);
    expect(done.body.transactionHash).to.equal(hash);
    expect(await nonce()).to.equal(before + 1);
    // Log lines are written within 200 ms (buffered).
    await waitFor("the re-send's log line", async () =>
      /re-sent a transaction the node no longer knew/.test(survivor.output()) ? true : undefined,
    );
  });
});
