/**
 * Cancel and speed-up on a real chain (issue 40 item 1): the service as `npm start` runs it
 * (production mode, RPC_URL, a SQLite journal, metrics and access logs on, ACCESS_FILE, a webhook
 * receiver) on Foundry's anvil, its mining paused so that a trade's transaction stays pending.
 *
 * - a pending trade cancelled: its no-op takes the nonce, the trade is `cancelled`, nothing paid
 *   (the customer's and the wallet's token balances unchanged), `trade.cancelled`;
 * - another sped up: mined with the fee asked, confirmed;
 * - a third cancelled too late: its own transaction mined first (the no-op lost on the way), the
 *   trade `confirmed` and paid once, the cancel `too_late` in the retry's answer, GET and
 *   `trade.cancel_failed`;
 * - a final trade 409, a held trade cancelled at once, a key that did not send it refused (404 or
 *   403) with the wallet's nonce unmoved, the fee cap and the replacement's minimum 400;
 * - a cancel recorded, the service restarted and its no-op gone from the node: still cancelled;
 * - gRPC CancelTrade and SpeedUpTrade with a real client (@grpc/grpc-js).
 *
 * RESUBMIT_AFTER_MS is 10 minutes here (default 30 s): the monitor's own re-pricing of a pending
 * transaction would race the fees these tests assert; the two tests about that race restart the
 * service with it at 1 s, and with TRADE_LIFETIME_S at 10 s for the race with the deadline's no-op.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { balanceOf } from "../../helpers/real-chain.js";
import { freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { getJson, grpcCall, grpcClient, type GrpcServiceClient, type JsonBody, LogSink, postJson } from "./helpers.js";

const KEYS = {
  desk: "cancel-desk-key-0123456789abcdef",
  other: "cancel-other-key-0123456789abcde",
  viewer: "cancel-viewer-key-0123456789abcd",
  ops: "cancel-ops-key-0123456789abcdefg",
  held: "cancel-held-key-0123456789abcdef",
  risk: "cancel-risk-key-0123456789abcdef",
} as const;
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);
const GWEI = 10n ** 9n;
const sha = (secret: string) => createHash("sha256").update(secret).digest("hex");

function accessFile() {
  const key = (name: string, secret: string, roles: string[], more: object = {}) => ({
    name,
    sha256: sha(secret),
    roles,
    ...more,
  });
  return {
    keys: [
      key("desk", KEYS.desk, ["trader"]),
      key("other", KEYS.other, ["trader"]),
      key("viewer", KEYS.viewer, ["viewer"], { sees: ["desk"] }),
      key("ops", KEYS.ops, ["admin"]),
      key("held", KEYS.held, ["trader"]),
      key("risk", KEYS.risk, ["approver"], { sees: ["held"] }),
    ],
    approvals: [{ name: "every held trade", aboveUsd: "0", keys: ["held"], approvers: 1, expiresAfter: "1h" }],
  };
}

describe("cancel and speed-up on a real chain (anvil, mining paused)", function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let receiver: WebhookReceiver;
  let service: RunningService;
  let dir: string;
  let env: Record<string, string>;
  let usdc: string;
  let token: string;
  let client: GrpcServiceClient;
  const logs = new LogSink();

  const url = (path: string) => `${service.apiUrl}${path}`;
  const pause = async () => {
    await anvil.rpc("evm_setAutomine", [false]);
    await anvil.rpc("evm_setIntervalMining", [0]);
  };
  const resume = async () => void (await anvil.rpc("evm_setIntervalMining", [1]));
  const nonces = async () => ({
    latest: Number(await anvil.rpc<string>("eth_getTransactionCount", [EXCHANGE.address, "latest"])),
    pending: Number(await anvil.rpc<string>("eth_getTransactionCount", [EXCHANGE.address, "pending"])),
  });
  const balances = async () => ({
    customer: await balanceOf(anvil, usdc, CUSTOMER),
    walletToken: await balanceOf(anvil, token, EXCHANGE.address),
  });
  const trade = (id: string, key: string = KEYS.desk) => getJson(url(`/api/v1/trades/${id}`), { apiKey: key });
  const eventsOf = (id: string) => receiver.received.filter((event) => event.data.id === id);

  /** A sell by `key` left pending (mining is paused): its id and first hash. */
  async function pendingSell(key: string = KEYS.desk, amount = "2"): Promise<{ id: string; hash: string }> {
    const body = { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount, usdAddress: usdc };
    const sold = await postJson(url("/api/v1/token/sell"), body, { apiKey: key });
    expect(sold.status, sold.text).to.equal(504);
    const hash = /transaction (0x[0-9a-f]{64})/.exec(sold.body.message)![1]!;
    const found = await trade(hash, key);
    expect(found.status, found.text).to.equal(200);
    return { id: found.body.id, hash };
  }

  /** POST /api/v1/trades/{id}/<action> with no body and no Content-Type, or with a JSON body. */
  async function act(action: "cancel" | "speed-up", id: string, key: string, body?: unknown) {
    const response = await fetch(url(`/api/v1/trades/${id}/${action}`), {
      method: "POST",
      headers: { api_key: key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, text, body: JSON.parse(text) as JsonBody, headers: response.headers };
  }

  async function start(more: Record<string, string> = {}): Promise<void> {
    service = await startService({ env: { ...env, ...more }, log: pino({ level: "info" }, logs) });
    client?.close();
    client = grpcClient(service.apiUrl);
  }

  before(async function () {
    [anvil, receiver] = await Promise.all([startAnvil({ blockTime: 1 }), startWebhookReceiver()]);
    const addresses = await deployOnAnvil(anvil, 1000);
    usdc = addresses.stableCoins.USDC;
    token = addresses.token;
    dir = mkdtempSync(join(tmpdir(), "cancel-anvil-"));
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    writeFileSync(join(dir, "access.json"), JSON.stringify(accessFile()));
    writeFileSync(
      join(dir, "webhooks.json"),
      JSON.stringify({
        endpoints: [{ apiKeyId: sha(KEYS.desk).slice(0, 32), url: receiver.url, secrets: [receiver.secret] }],
      }),
    );
    env = {
      RPC_URL: anvil.url,
      DEPLOYMENT_FILE: join(dir, "deployment.json"),
      EXCHANGE_PRIVATE_KEYS: EXCHANGE.privateKey,
      ACCESS_FILE: join(dir, "access.json"),
      PORT: "0",
      METRICS_PORT: String(await freePort()),
      DATA_DIR: join(dir, "data"),
      WEBHOOKS_FILE: join(dir, "webhooks.json"),
      // The receiver listens on plain HTTP on this machine, which production refuses.
      WEBHOOK_ALLOW_INSECURE: "true",
      WEBHOOK_ALLOW_PRIVATE: "true",
      // A trade's call waits 1 s for its receipt (then 504, pending), and the monitor looks every 250 ms.
      RECEIPT_TIMEOUT_MS: "1000",
      MONITOR_INTERVAL_MS: "250",
      RESUBMIT_AFTER_MS: "600000",
      MAX_FEE_PER_GAS_GWEI: "50",
    };
    await start();
  });

  afterEach(async function () {
    await resume();
  });

  after(async function () {
    client?.close();
    await service?.close();
    await receiver?.close();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("(a) cancels a pending trade: its no-op takes the nonce, nothing is paid, trade.cancelled", async function () {
    await pause();
    const before = await balances();
    const { id, hash } = await pendingSell();
    const at = await nonces();
    expect(at.pending).to.equal(at.latest + 1);

    // Refusals sign nothing: another trader does not see it (404, as GET); a viewer that sees it did not send it (403).
    const unseen = await act("cancel", id, KEYS.other);
    expect([unseen.status, unseen.body.code]).to.deep.equal([404, "not_found"]);
    const viewer = await act("cancel", id, KEYS.viewer);
    expect([viewer.status, viewer.body.code]).to.deep.equal([403, "permission_denied"]);
    expect(viewer.body.message).to.match(/api key "viewer" may not cancel or speed up/);
    expect(await nonces()).to.deep.equal(at);
    expect((await trade(id)).body.transactions).to.have.length(1);

    const cancelled = await act("cancel", id, KEYS.desk);
    expect(cancelled.status, cancelled.text).to.equal(202);
    expect(cancelled.headers.get("location")).to.equal(`/api/v1/trades/${id}`);
    expect(cancelled.body).to.deep.include({ id, status: "submitted", nonce: at.latest });
    expect(cancelled.body.cancel).to.deep.include({ requestedBy: "desk", outcome: "pending" });
    const noop = cancelled.body.cancel.noopHash;
    expect(noop).to.match(/^0x[0-9a-f]{64}$/);
    expect(cancelled.body.transactionHash).to.equal(noop);
    expect(cancelled.body.transactions.map((t: JsonBody) => [t.hash, t.noop])).to.deep.equal([
      [hash, false],
      [noop, true],
    ]);
    // At least 10 % more on both fees, never above the cap.
    const [first, second] = cancelled.body.transactions as JsonBody[];
    expect(BigInt(second.maxFeePerGas)).to.be.greaterThan((BigInt(first.maxFeePerGas) * 11n) / 10n);
    expect(BigInt(second.maxPriorityFeePerGas)).to.be.greaterThan((BigInt(first.maxPriorityFeePerGas) * 11n) / 10n);
    expect(BigInt(second.maxFeePerGas)).to.be.at.most(50n * GWEI);
    // The replacement is at the trade's own nonce: the wallet's next nonce did not move.
    expect(await nonces()).to.deep.equal(at);
    const onNode = await anvil.rpc<JsonBody>("eth_getTransactionByHash", [noop]);
    expect([Number(onNode.nonce), onNode.to?.toLowerCase(), BigInt(onNode.value)]).to.deep.equal([
      at.latest,
      EXCHANGE.address.toLowerCase(),
      0n,
    ]);

    // Asked again: the same outcome, nothing signed again.
    const again = await act("cancel", id, KEYS.desk, {});
    expect(again.status, again.text).to.equal(202);
    expect(again.body.cancel.noopHash).to.equal(noop);
    expect(again.body.transactions).to.have.length(2);

    await resume();
    await waitFor("the trade cancelled", async () => (await trade(id)).body.status === "cancelled", 60_000);
    const final = (await trade(id)).body;
    expect(final.cancel).to.deep.include({ outcome: "done", noopHash: noop });
    expect(final.receipt).to.equal(null);
    expect(final.error.code).to.equal("trade_cancelled");
    expect(await balances()).to.deep.equal(before);
    expect((await nonces()).latest).to.equal(at.latest + 1);
    await receiver.until(() => eventsOf(id).some((event) => event.type === "trade.cancelled"), 30_000);
    const event = eventsOf(id).find((e) => e.type === "trade.cancelled")!;
    expect(event.data.cancel).to.deep.include({ outcome: "done", noopHash: noop });
    // Final now: a cancel or a speed-up is 409, naming the state.
    const late = await act("cancel", id, KEYS.desk);
    expect(late.status).to.equal(202); // its own cancel, asked again: its outcome
    const speed = await act("speed-up", id, KEYS.desk);
    expect([speed.status, speed.body.code]).to.deep.equal([409, "failed_precondition"]);
    expect(speed.body.message).to.match(/is cancelled/);
  });

  it("(b) speeds a pending trade up: mined with the fee asked, confirmed; the cap and the minimum are 400", async function () {
    await pause();
    const before = await balances();
    const { id, hash } = await pendingSell();
    const at = await nonces();
    const first = (await trade(id)).body.transactions[0] as JsonBody;

    const over = await act("speed-up", id, KEYS.desk, { maxFeePerGasGwei: "50.000000001" });
    expect([over.status, over.body.code]).to.deep.equal([400, "invalid_argument"]);
    expect(over.body.message).to.match(/^maxFeePerGasGwei: must be at most 50 gwei, this service's fee cap/);
    const under = await act("speed-up", id, KEYS.desk, { maxFeePerGasGwei: "0.000000001" });
    expect([under.status, under.body.code]).to.deep.equal([400, "invalid_argument"]);
    const least = BigInt(first.maxFeePerGas) + BigInt(first.maxFeePerGas) / 10n + 1n;
    expect(under.body.message).to.include(`maxFeePerGasGwei: must be at least`);
    expect(under.body.message).to.include(`${Number(least) / 1e9}`.slice(0, 4));
    const unseen = await act("speed-up", id, KEYS.other);
    expect(unseen.status).to.equal(404);
    expect(await nonces()).to.deep.equal(at);
    expect((await trade(id)).body.transactions).to.have.length(1);

    const sped = await act("speed-up", id, KEYS.desk, { maxFeePerGasGwei: "40" });
    expect(sped.status, sped.text).to.equal(202);
    const faster = sped.body.transactions.at(-1) as JsonBody;
    expect(faster).to.deep.include({ noop: false, maxFeePerGas: (40n * GWEI).toString() });
    expect(sped.body.transactionHash).to.equal(faster.hash).and.not.equal(hash);
    expect(sped.body.cancel).to.equal(undefined);
    expect(await nonces()).to.deep.equal(at);

    await resume();
    await waitFor("the trade confirmed", async () => (await trade(id)).body.status === "confirmed", 60_000);
    const final = (await trade(id)).body;
    expect(final.receipt.transactionHash).to.equal(faster.hash);
    const mined = await anvil.rpc<JsonBody>("eth_getTransactionByHash", [faster.hash]);
    expect(BigInt(mined.maxFeePerGas)).to.equal(40n * GWEI);
    expect((await balances()).customer).to.be.greaterThan(before.customer);

    // Final: 409 naming its state, nothing signed.
    const cancel = await act("cancel", id, KEYS.desk);
    expect([cancel.status, cancel.body.code]).to.deep.equal([409, "failed_precondition"]);
    expect(cancel.body.message).to.match(/is confirmed: there is nothing to cancel/);
    expect((await trade(id)).body.transactions).to.have.length(2);
  });

  it("(c) reports a cancel too late when the trade's own transaction is mined first: confirmed, paid once, too_late", async function () {
    await pause();
    const before = await balances();
    const { id, hash } = await pendingSell();
    const raw = await anvil.rpc<string>("eth_getRawTransactionByHash", [hash]);
    const cancelled = await act("cancel", id, KEYS.desk);
    expect(cancelled.status, cancelled.text).to.equal(202);
    const noop = cancelled.body.cancel.noopHash as string;
    // The no-op is lost on its way (a node that evicted it), and the trade's own transaction is mined first.
    await anvil.rpc("anvil_dropTransaction", [noop]);
    await anvil.rpc("eth_sendRawTransaction", [raw]);
    await anvil.rpc("evm_mine");
    await resume();

    await waitFor("the trade confirmed", async () => (await trade(id)).body.status === "confirmed", 60_000);
    const read = (await trade(id)).body;
    expect(read.cancel).to.deep.include({ requestedBy: "desk", outcome: "too_late" });
    expect(read.receipt.transactionHash).to.equal(hash);
    const retry = await act("cancel", id, KEYS.desk);
    expect(retry.status, retry.text).to.equal(202);
    expect([retry.body.status, retry.body.cancel.outcome]).to.deep.equal(["confirmed", "too_late"]);
    await receiver.until(() => eventsOf(id).some((event) => event.type === "trade.cancel_failed"), 30_000);
    const event = eventsOf(id).find((e) => e.type === "trade.cancel_failed")!;
    const data = event.data as JsonBody;
    expect([data.status, data.cancel.outcome]).to.deep.equal(["confirmed", "too_late"]);
    // Paid once: the customer got the receipt's payout, and the no-op is nowhere.
    const paid = (await balances()).customer - before.customer;
    const transfer = Object.values(read.receipt.events as Record<string, JsonBody>).find(
      (log) => log.address.toLowerCase() === usdc.toLowerCase(),
    )!;
    expect(paid).to.equal(BigInt(transfer.raw.data));
    expect(await anvil.rpc("eth_getTransactionReceipt", [noop])).to.equal(null);
  });

  it("cancels a held trade at once, nothing signed, and refuses nothing to its sender", async function () {
    const at = await nonces();
    const body = { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "2", usdAddress: usdc };
    const held = await postJson(url("/api/v1/token/sell"), body, { apiKey: KEYS.held });
    expect([held.status, held.body.status]).to.deep.equal([202, "pending_approval"]);
    const refused = await act("cancel", held.body.id, KEYS.desk);
    expect(refused.status).to.equal(404);
    const cancelled = await act("cancel", held.body.id, KEYS.held);
    expect(cancelled.status, cancelled.text).to.equal(202);
    expect(cancelled.body).to.deep.include({ status: "cancelled", transactionHash: null });
    expect(cancelled.body.cancel).to.deep.include({ requestedBy: "held", outcome: "done", noopHash: null });
    expect(await nonces()).to.deep.equal(at);
    // Nothing left to approve.
    const approve = await postJson(url(`/api/v1/trades/${held.body.id}/approve`), {}, { apiKey: KEYS.risk });
    expect([approve.status, approve.body.code], approve.text).to.deep.equal([409, "aborted"]);
    expect(await nonces()).to.deep.equal(at);
  });

  it("sees a cancel through after a restart, its no-op gone from the node: cancelled", async function () {
    await pause();
    const before = await balances();
    const { id } = await pendingSell();
    const cancelled = await act("cancel", id, KEYS.ops); // an admin may
    expect(cancelled.status, cancelled.text).to.equal(202);
    expect(cancelled.body.cancel.requestedBy).to.equal("ops");
    const noop = cancelled.body.cancel.noopHash as string;
    await service.close();
    await anvil.rpc("anvil_dropTransaction", [noop]);
    await start();
    await resume();
    // The restarted monitor finds the nonce's transactions unknown, sends the no-op's bytes again, sees it mined.
    await waitFor("the trade cancelled", async () => (await trade(id)).body.status === "cancelled", 90_000);
    expect((await trade(id)).body.cancel).to.deep.include({ outcome: "done", noopHash: noop });
    expect(await balances()).to.deep.equal(before);
  });

  it("serves CancelTrade and SpeedUpTrade over gRPC, with the matching codes", async function () {
    await pause();
    const { id } = await pendingSell();
    const at = await nonces();
    const unseen = await grpcCall(client, "CancelTrade", { id }, KEYS.other);
    expect(unseen.error?.code, unseen.error?.message).to.equal(grpc.status.NOT_FOUND);
    const denied = await grpcCall(client, "SpeedUpTrade", { id }, KEYS.viewer);
    expect(denied.error?.code, denied.error?.message).to.equal(grpc.status.PERMISSION_DENIED);
    const over = await grpcCall(client, "SpeedUpTrade", { id, max_fee_per_gas_gwei: "51" }, KEYS.desk);
    expect(over.error?.code, over.error?.message).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(over.error?.details).to.match(/maxFeePerGasGwei: must be at most 50 gwei/);
    expect(await nonces()).to.deep.equal(at);
    const sped = await grpcCall(client, "SpeedUpTrade", { id }, KEYS.desk);
    expect(sped.error, sped.error?.message).to.equal(undefined);
    expect((sped.response as JsonBody).transactions).to.have.length(2);
    const cancelled = await grpcCall(client, "CancelTrade", { id }, KEYS.desk);
    expect(cancelled.error, cancelled.error?.message).to.equal(undefined);
    const cancel = (cancelled.response as JsonBody).cancel;
    expect(cancel).to.deep.include({ requested_by: "desk", outcome: "pending" });
    expect(cancel.noop_hash).to.match(/^0x[0-9a-f]{64}$/);
    await resume();
    await waitFor("the trade cancelled", async () => (await trade(id)).body.status === "cancelled", 60_000);
    const final = await grpcCall(client, "CancelTrade", { id }, KEYS.desk);
    expect((final.response as JsonBody).cancel.outcome).to.equal("done");
    const after = await grpcCall(client, "SpeedUpTrade", { id }, KEYS.desk);
    expect(after.error?.code, after.error?.message).to.equal(grpc.status.FAILED_PRECONDITION);
  });

  it("races the monitor's own re-pricing: the no-op outbids its latest bid, and its re-pricing of the no-op stays a no-op", async function () {
    await service.close();
    await start({ RESUBMIT_AFTER_MS: "1000" });
    try {
      await pause();
      const before = await balances();
      const { id } = await pendingSell();
      await waitFor("the monitor's re-pricing", async () => (await trade(id)).body.transactions.length >= 2, 30_000);
      const cancelled = await act("cancel", id, KEYS.desk);
      expect(cancelled.status, cancelled.text).to.equal(202);
      const sent = cancelled.body.transactions as JsonBody[];
      const [last, noop] = [sent.at(-2), sent.at(-1)];
      expect(noop.noop).to.equal(true);
      expect(BigInt(noop.maxFeePerGas)).to.be.greaterThan((BigInt(last.maxFeePerGas) * 11n) / 10n);
      // The monitor re-prices the pending no-op in its turn: a no-op again, at the same nonce.
      const count = sent.length;
      await waitFor("the no-op re-priced", async () => (await trade(id)).body.transactions.length > count, 30_000);
      const later = (await trade(id)).body.transactions as JsonBody[];
      expect(later.slice(count - 1).every((t) => t.noop)).to.equal(true);
      await resume();
      await waitFor("the trade cancelled", async () => (await trade(id)).body.status === "cancelled", 60_000);
      expect(await balances()).to.deep.equal(before);
    } finally {
      await service.close();
      await start();
    }
  });

  it("races the deadline's no-op: a cancel asked once it is pending signs nothing more, and the trade ends cancelled", async function () {
    await service.close();
    await start({ TRADE_LIFETIME_S: "10" });
    try {
      await pause();
      const before = await balances();
      const { id } = await pendingSell();
      await waitFor(
        "the deadline's no-op",
        async () => (await trade(id)).body.transactions.some((t: JsonBody) => t.noop),
        40_000,
      );
      const pending = (await trade(id)).body.transactions as JsonBody[];
      const cancelled = await act("cancel", id, KEYS.desk);
      expect(cancelled.status, cancelled.text).to.equal(202);
      expect(cancelled.body.transactions).to.have.length(pending.length);
      expect(cancelled.body.cancel).to.deep.include({ outcome: "pending", noopHash: pending.at(-1).hash });
      await resume();
      await waitFor("the trade cancelled", async () => (await trade(id)).body.status === "cancelled", 60_000);
      expect((await trade(id)).body.cancel.outcome).to.equal("done");
      expect(await balances()).to.deep.equal(before);
    } finally {
      await service.close();
      await start();
    }
  });
});
