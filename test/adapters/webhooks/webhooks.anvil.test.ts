/**
 * Webhooks on a real chain: the service (production mode, RPC_URL, a SQLite journal) on
 * Foundry's anvil, as the lifecycle tests run it, with WEBHOOKS_FILE naming a node:http
 * receiver that verifies every delivery with the `standardwebhooks` package. A fee spike makes
 * the monitor replace a trade, and a reorg takes a confirmed trade's block away: the receiver is
 * told `trade.replaced` and `trade.reorged`, then the final state, each event carrying the trade
 * as GET /api/v1/trades/{hash} shows it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { anvilServiceEnv, writeWebhooksFile } from "../../helpers/anvil-service.js";
import { freePort } from "../../helpers/service-defaults.js";
import { startWebhookReceiver, type ReceivedEvent, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { LogSink, getJson, postJson, type JsonBody } from "../transport/helpers.js";
import { waitFor } from "../../helpers/wait.js";

const KEY = "anvil-webhooks-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);
const GWEI = 10n ** 9n;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Setup {
  anvil: Anvil;
  service: RunningService;
  receiver: WebhookReceiver;
  logs: LogSink;
  pause(): Promise<void>;
  resume(): Promise<void>;
  sell(idempotencyKey?: string): ReturnType<typeof postJson>;
  trade(hash: string): ReturnType<typeof getJson>;
  /** The events the receiver accepted for one trade, in arrival order. */
  eventsOf(tradeId: string): ReceivedEvent[];
  close(): Promise<void>;
}

/** anvil with the suite deployed, a receiver, and the service on both with quick timings. */
async function setUp(env: Record<string, string> = {}): Promise<Setup> {
  const [anvil, receiver] = await Promise.all([startAnvil({ blockTime: 1 }), startWebhookReceiver()]);
  const addresses = await deployOnAnvil(anvil, 1000);
  const dir = mkdtempSync(join(tmpdir(), "anvil-webhooks-"));
  writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
  const webhooks = writeWebhooksFile(dir, KEY, receiver);
  const logs = new LogSink();
  const service = await startService({
    env: {
      ...anvilServiceEnv(anvil, dir, KEY, EXCHANGE.privateKey),
      ...webhooks,
      METRICS_PORT: String(await freePort()),
      DATA_DIR: join(dir, "data"),
      RESUBMIT_AFTER_MS: "2000",
      ...env,
    },
    log: pino({ level: "info" }, logs),
  });
  const body = {
    userAddress: EXCHANGE.address,
    destinatary: CUSTOMER,
    amount: "2",
    usdAddress: addresses.stableCoins.USDC,
  };
  return {
    anvil,
    service,
    receiver,
    logs,
    pause: async () => {
      await anvil.rpc("evm_setAutomine", [false]);
      await anvil.rpc("evm_setIntervalMining", [0]);
    },
    resume: async () => void (await anvil.rpc("evm_setIntervalMining", [1])),
    sell: (idempotencyKey) =>
      postJson(`${service.apiUrl}/api/v1/token/sell`, body, {
        apiKey: KEY,
        headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
      }),
    trade: (hash) => getJson(`${service.apiUrl}/api/v1/trades/${hash}`, { apiKey: KEY }),
    eventsOf: (tradeId) => receiver.received.filter((event) => event.data.id === tradeId),
    async close() {
      await service.close();
      await receiver.close();
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The hash a 504 "trade pending" names. */
function pendingHash(answer: { status: number; body: { message?: string } }): string {
  expect(answer.status, JSON.stringify(answer.body)).to.equal(504);
  return /transaction (0x[0-9a-f]{64})/.exec(answer.body.message ?? "")![1]!;
}

/** What each event type says of the trade's status. */
const STATUS_OF: Record<string, string> = {
  "trade.submitted": "submitted",
  "trade.replaced": "submitted",
  "trade.reorged": "submitted",
  "trade.mined": "mined",
  "trade.confirmed": "confirmed",
};

/**
 * Each event's payload is the trade as GET shows it: the same fields, the trade GET finds by
 * the event's hash, its broadcasts so far, and the status the event reports. The last event is
 * the final state as GET shows it, but for what the chain tells GET at the time it is asked.
 */
async function expectPayloadsAsShown(setup: Setup, events: ReceivedEvent[], final: JsonBody): Promise<void> {
  for (const event of events) {
    const data = event.data as JsonBody;
    expect(Object.keys(data).sort(), event.type).to.deep.equal(Object.keys(final).sort());
    expect(data.status, event.type).to.equal(STATUS_OF[event.type]);
    expect(data.confirmations, event.type).to.equal(null);
    for (const field of ["id", "kind", "request", "wallet", "nonce", "deadline", "createdAt"]) {
      expect(data[field], `${event.type}: ${field}`).to.deep.equal(final[field]);
    }
    expect(final.transactions.slice(0, data.transactions.length), event.type).to.deep.equal(data.transactions);
    expect(data.receipt === null, event.type).to.equal(data.status === "submitted");
    const byHash = await setup.trade(data.transactionHash);
    expect(byHash.status, byHash.text).to.equal(200);
    expect(byHash.body.id).to.equal(data.id);
    expect(Date.parse(event.timestamp)).to.equal(Date.parse(data.updatedAt));
  }
  const { confirmations: _c, updatedAt: _u, ...last } = events.at(-1)!.data;
  const { confirmations: _c2, updatedAt: _u2, ...shown } = final;
  expect(last).to.deep.equal(shown);
}

describe("webhooks on a real chain (anvil, 1 s blocks)", function () {
  this.timeout(180_000);
  let setup: Setup | undefined;

  afterEach(async function () {
    await setup?.close();
    setup = undefined;
  });

  it("tells of a fee spike's replacement with trade.replaced, then of the trade confirmed", async function () {
    setup = await setUp({ MAX_FEE_PER_GAS_GWEI: "50" });
    const s = setup;
    await s.pause();
    const hash = pendingHash(await s.sell("spike-1"));
    const { id } = (await s.trade(hash)).body;
    await s.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${(100n * GWEI).toString(16)}`]);
    await s.resume();
    // The base fee is 100 gwei now, above the trade's maxFeePerGas: the monitor re-prices it (up to the cap).
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.replaced"), 30_000);
    expect(s.eventsOf(id).some((event) => event.type === "trade.confirmed")).to.equal(false);

    // The spike ends.
    await s.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${GWEI.toString(16)}`]);
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.confirmed"), 60_000);
    await sleep(1_000); // nothing follows the final state
    const events = s.eventsOf(id);
    expect(s.receiver.rejected).to.equal(0);
    expect(events.map((event) => event.type).join(" ")).to.match(
      /^trade\.submitted( trade\.replaced)+( trade\.mined)? trade\.confirmed$/,
    );
    expect(new Set(events.map((event) => event.id)).size, "a webhook-id per event").to.equal(events.length);
    const final = await s.trade(hash);
    expect(final.body.status).to.equal("confirmed");
    expect(final.body.transactions.length).to.be.at.least(2);
    await expectPayloadsAsShown(s, events, final.body);
    // Each replacement names its own transaction, the newest of the trade's at the time.
    for (const event of events.filter((e) => e.type === "trade.replaced")) {
      const data = event.data as JsonBody;
      expect(data.transactions.length).to.be.at.least(2);
      expect(data.transactionHash).to.equal(data.transactions.at(-1).hash);
    }
  });

  it("tells of a reorg with trade.reorged, then of the trade confirmed again in the canonical block", async function () {
    setup = await setUp();
    const s = setup;
    const first = await s.sell("reorg-1");
    expect(first.status, first.text).to.equal(200);
    const { id } = (await s.trade(first.body.transactionHash)).body;
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.confirmed"));
    await waitFor(
      "a block on top",
      async () => Number(await s.anvil.rpc<string>("eth_blockNumber")) > first.body.blockNumber,
    );
    // No block is made while the monitor looks, so the transaction is not mined again before it does.
    await s.pause();
    const head = Number(await s.anvil.rpc<string>("eth_blockNumber"));
    await s.anvil.rpc("anvil_reorg", [head - first.body.blockNumber + 1, []]);
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.reorged"), 30_000);
    await s.resume();

    await s.receiver.until(() => s.eventsOf(id).at(-1)?.type === "trade.confirmed", 60_000);
    await sleep(1_000); // nothing follows the final state
    const events = s.eventsOf(id);
    expect(s.receiver.rejected).to.equal(0);
    expect(events.map((event) => event.type).join(" ")).to.match(
      /^(trade\.submitted )?(trade\.mined )?trade\.confirmed trade\.reorged( trade\.replaced)*( trade\.mined)? trade\.confirmed$/,
    );
    expect(new Set(events.map((event) => event.id)).size, "a webhook-id per event").to.equal(events.length);
    const final = await s.trade(first.body.transactionHash);
    expect(final.body.status).to.equal("confirmed");
    await expectPayloadsAsShown(s, events, final.body);
    const confirmed = events.filter((event) => event.type === "trade.confirmed").map((event) => event.data as JsonBody);
    expect(confirmed[0].receipt.blockHash, "the first receipt's block").to.equal(first.body.blockHash);
    expect(confirmed.at(-1).receipt.blockHash, "an orphaned block's receipt").to.not.equal(first.body.blockHash);
    const block = await s.anvil.rpc<{ hash: string }>("eth_getBlockByNumber", [
      `0x${confirmed.at(-1).receipt.blockNumber.toString(16)}`,
      false,
    ]);
    expect(block.hash).to.equal(confirmed.at(-1).receipt.blockHash);
    expect(s.logs.text).to.match(/reorg: transaction's block left the canonical chain/);
  });

  it("tells of a reorg that mines the transaction again in another block, then of the trade confirmed there", async function () {
    setup = await setUp();
    const s = setup;
    const first = await s.sell("reorg-2");
    expect(first.status, first.text).to.equal(200);
    const { id } = (await s.trade(first.body.transactionHash)).body;
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.confirmed"));
    await waitFor(
      "a block on top",
      async () => Number(await s.anvil.rpc<string>("eth_blockNumber")) > first.body.blockNumber,
    );
    const raw = await s.anvil.rpc<string>("eth_getRawTransactionByHash", [first.body.transactionHash]);
    // No block between reading the head and the reorg, whose depth is counted from anvil's head.
    await s.pause();
    const head = Number(await s.anvil.rpc<string>("eth_blockNumber"));
    // The new chain holds the same transaction, in its first block: the receipt changes, the status does not.
    await s.anvil.rpc("anvil_reorg", [head - first.body.blockNumber + 1, [[raw, 0]]]);
    await s.resume();
    await s.receiver.until(() => s.eventsOf(id).some((event) => event.type === "trade.reorged"), 30_000);
    await s.receiver.until(() => s.eventsOf(id).at(-1)?.type === "trade.confirmed", 30_000);
    await sleep(1_000); // nothing follows the final state
    const events = s.eventsOf(id);
    expect(s.receiver.rejected).to.equal(0);
    expect(events.map((event) => event.type).join(" ")).to.match(
      /^(trade\.submitted )?(trade\.mined )?trade\.confirmed trade\.reorged( trade\.mined)? trade\.confirmed$/,
    );
    expect(s.logs.text).to.match(/reorg: transaction mined again in another block/);
    const final = await s.trade(first.body.transactionHash);
    expect(final.body.status).to.equal("confirmed");
    expect(final.body.receipt.blockHash, "an orphaned block's receipt").to.not.equal(first.body.blockHash);
    expect(final.body.transactionHash, "the same transaction").to.equal(first.body.transactionHash);
    await expectPayloadsAsShown(s, events, final.body);
  });
});
