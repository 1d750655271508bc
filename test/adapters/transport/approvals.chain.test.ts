/**
 * Approvals (issue 38) on real chains, EDR and anvil, with the service as an operator runs it
 * (RPC_URL, DEPLOYMENT_FILE, ACCESS_FILE, metrics and access logs on, the SQLite journal): a trade
 * above a rule's threshold is held with nothing signed, answered 202 (JSON) or failed_precondition
 * with trade-id and trade-status (gRPC, Connect), then approved and paid exactly once, rejected,
 * or left to expire; who may decide; two approvals where a rule asks for two; a held trade keeping
 * its room in a limit; a keyed retry answering 202, then the receipt. Every step where nothing may
 * be sent asserts the exchange wallet's nonce.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { Contract, JsonRpcProvider, Wallet } from "ethers";
import { pino } from "pino";

import type { DeploymentAddresses } from "../../../adapters/chain/index.js";
import { startService, type RunningService } from "../../../adapters/main.js";
import { TradeRequestSchema } from "../../../gen/tokentrade/v1/token_pb.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil } from "../../helpers/anvil.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { getJson, grpcCall, grpcClient, type GrpcServiceClient, type JsonBody, postJson } from "./helpers.js";

interface Node {
  url: string;
  addresses: DeploymentAddresses;
  close(): Promise<void>;
}

const NODES: Array<[string, () => Promise<Node>]> = [
  [
    "EDR",
    async () => {
      const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
      return { url: chain.rpcUrl, addresses: chain.addresses, close: () => chain.close() };
    },
  ],
  [
    "anvil",
    async () => {
      const anvil = await startAnvil();
      const addresses = await deployOnAnvil(anvil, 0);
      await anvil.rpc("evm_setAutomine", [true]);
      return { url: anvil.url, addresses, close: () => anvil.stop() };
    },
  ],
];

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const KEYS = {
  desk: "desk-key-0123456789abcdefgh",
  quick: "quick-key-0123456789abcdefg",
  self: "self-key-0123456789abcdefgh",
  risk1: "risk-one-key-0123456789abcd",
  risk2: "risk-two-key-0123456789abcd",
  blind: "blind-key-0123456789abcdefg",
  viewer: "viewer-key-0123456789abcdef",
  admin: "admin-key-0123456789abcdefg",
} as const;
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const FEED_ABI = [
  "function updateAnswer(int256 answer)",
  "function latestRoundData() view returns (uint80, int256, uint256, uint256, uint80)",
];
/** How long a quote may be used: 10 s rather than the default 30 s, so that one expires while its trade is held within the test's time. */
const QUOTE_TTL_MS = 10_000;
const WALLET = hardhatAccount(EXCHANGE_ACCOUNT);

/** The access file: two desks and a key that both trades and approves, approvers that see them (or not), the rules. */
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
      key("quick", KEYS.quick, ["trader"]),
      key("self", KEYS.self, ["trader", "approver"]),
      key("risk-1", KEYS.risk1, ["approver"], { sees: ["desk", "quick", "self"] }),
      key("risk-2", KEYS.risk2, ["approver"], { sees: ["desk", "quick", "self"] }),
      key("blind", KEYS.blind, ["approver"], { sees: ["quick"] }),
      key("viewer", KEYS.viewer, ["viewer"], { sees: ["desk"] }),
      key("admin", KEYS.admin, ["admin"]),
    ],
    limits: [{ name: "quick hourly", per: "key", keys: ["quick"], window: "1h", maxUsd: "200" }],
    approvals: [
      { name: "large payouts", aboveUsd: "100", keys: ["desk", "self"], approvers: 1, expiresAfter: "1h" },
      { name: "huge payouts", aboveUsd: "1000", keys: ["desk"], approvers: 2, expiresAfter: "1h" },
      { name: "quick payouts", aboveUsd: "100", keys: ["quick"], expiresAfter: "3s" },
    ],
  };
}

for (const [name, start] of NODES) {
  describe(`approvals on ${name}`, function () {
    this.timeout(180_000);
    let node: Node;
    let service: RunningService;
    let provider: JsonRpcProvider;
    let dir: string;
    let client: GrpcServiceClient;
    let DAI: string;
    let feed: Contract;
    let price: bigint;
    let receiver: WebhookReceiver;

    before(async function () {
      node = await start();
      dir = mkdtempSync(join(tmpdir(), "approvals-chain-"));
      writeFileSync(join(dir, "deployment.json"), JSON.stringify(node.addresses));
      writeFileSync(join(dir, "access.json"), JSON.stringify(accessFile()));
      // desk's webhooks: its key's id is the first 32 hex digits of its SHA-256.
      receiver = await startWebhookReceiver();
      writeFileSync(
        join(dir, "webhooks.json"),
        JSON.stringify({
          endpoints: [{ apiKeyId: sha(KEYS.desk).slice(0, 32), url: receiver.url, secrets: [receiver.secret] }],
        }),
      );
      provider = new JsonRpcProvider(node.url, undefined, { staticNetwork: true, cacheTimeout: -1 });
      DAI = node.addresses.stableCoins.DAI;
      service = await startService({
        env: {
          RPC_URL: node.url,
          DEPLOYMENT_FILE: join(dir, "deployment.json"),
          EXCHANGE_PRIVATE_KEYS: WALLET.privateKey,
          ACCESS_FILE: join(dir, "access.json"),
          PORT: "0",
          METRICS_PORT: String(await freePort()),
          DATA_DIR: mkdtempSync(join(dir, "data-")),
          QUOTE_TTL_MS: String(QUOTE_TTL_MS),
          WEBHOOKS_FILE: join(dir, "webhooks.json"),
          // The receiver listens on plain HTTP on this machine, which production refuses.
          WEBHOOK_ALLOW_INSECURE: "true",
          WEBHOOK_ALLOW_PRIVATE: "true",
        },
        log: defaultLog(),
        rootDir: dir,
      });
      client = grpcClient(service.apiUrl);
      // Account #0 (the deployer), never the exchange wallet: moving the price moves no nonce of the service's.
      feed = new Contract(node.addresses.feeds.tokenUsd, FEED_ABI, new Wallet(hardhatAccount(0).privateKey, provider));
      price = ((await feed.getFunction("latestRoundData")()) as bigint[])[1]!;
    });

    afterEach(async function () {
      // Every test starts at the deployment's price, updated now.
      await (await feed.getFunction("updateAnswer")(price)).wait();
    });

    after(async function () {
      client?.close();
      await service?.close();
      await receiver?.close();
      provider?.destroy();
      await node?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const nonce = () => provider.getTransactionCount(WALLET.address, "pending");
    const url = (path: string) => `${service.apiUrl}${path}`;
    const buy = (key: string, amount: string, headers: Record<string, string> = {}) =>
      postJson(
        url("/api/v1/token/buy"),
        { userAddress: WALLET.address, destinatary: CUSTOMER, amount, usdAddress: DAI },
        { apiKey: key, headers },
      );
    const decide = (key: string, id: string, verdict: "approve" | "reject", body?: object) =>
      postJson(url(`/api/v1/trades/${id}/${verdict}`), body, {
        apiKey: key,
        ...(body === undefined && { raw: "", contentType: null }),
      });
    const trade = (key: string, id: string) => getJson(url(`/api/v1/trades/${id}`), { apiKey: key });
    /** The trade once it is paid (mined or confirmed), as its GET shows it. */
    async function paid(id: string): Promise<JsonBody> {
      let last: JsonBody;
      await waitFor(
        `trade ${id} paid`,
        async () => {
          last = (await trade(KEYS.desk, id)).body;
          return last.status === "confirmed" || last.status === "mined" || last.status === "failed";
        },
        60_000,
        100,
      );
      return last;
    }

    /** A buy of `amount` DAI by `key`, held: its 202, checked; with nothing signed. */
    async function held(key: string, amount: string, headers: Record<string, string> = {}): Promise<JsonBody> {
      const before = await nonce();
      const answer = await buy(key, amount, headers);
      expect(answer.status, answer.text).to.equal(202);
      expect(answer.body.status).to.equal("pending_approval");
      expect(answer.headers.get("location")).to.equal(`/api/v1/trades/${answer.body.id}`);
      expect(answer.body.transactionHash).to.equal(null);
      expect(answer.body.transactions).to.deep.equal([]);
      expect(await nonce(), "held: nothing signed").to.equal(before);
      return answer.body;
    }

    it("holds a trade above the threshold with nothing signed, then, approved, pays it exactly once", async function () {
      const before = await nonce();
      const body = await held(KEYS.desk, "150");
      expect(body.approval).to.deep.include({ rules: ["large payouts"], required: 1, approvals: [], rejection: null });
      expect(Date.parse(body.approval.expiresAt) - Date.parse(body.approval.heldAt)).to.equal(3_600_000);
      // Found by its id (it has no hash yet), as its sender and as an approver that sees it.
      const view = await trade(KEYS.desk, body.id);
      expect(view.status, view.text).to.equal(200);
      expect(view.body).to.deep.include({ id: body.id, status: "pending_approval", apiKeyName: "desk" });
      const waiting = await getJson(url("/api/v1/approvals?status=pending"), { apiKey: KEYS.risk1 });
      expect(waiting.status, waiting.text).to.equal(200);
      expect(waiting.body.trades.map((t: JsonBody) => t.id)).to.include(body.id);
      // Still nothing signed a moment later: only an approval moves it.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await nonce()).to.equal(before);

      const approved = await decide(KEYS.risk1, body.id, "approve", { reason: "checked with the desk" });
      expect(approved.status, approved.text).to.equal(200);
      expect(approved.body.approval.approvals).to.have.length(1);
      expect(approved.body.approval.approvals[0]).to.deep.include({ by: "risk-1", reason: "checked with the desk" });
      expect(approved.body.approval.approvedAt).to.be.a("string");
      const done = await paid(body.id);
      expect(done.status, JSON.stringify(done.error)).to.be.oneOf(["mined", "confirmed"]);
      expect(done.receipt.status).to.equal(true);
      expect(done.transactionHash).to.match(/^0x[0-9a-f]{64}$/);
      // Its deadline counts from the approval, not from when it was held.
      expect(done.deadline * 1000).to.be.greaterThan(Date.parse(done.approval.approvedAt));
      expect(await nonce(), "paid exactly once").to.equal(before + 1);
      // The same approver again: the same answer, nothing sent again; any other decision: 409.
      const again = await decide(KEYS.risk1, body.id, "approve", { reason: "checked with the desk" });
      expect(again.status, again.text).to.equal(200);
      expect(again.body.id).to.equal(body.id);
      const late = await decide(KEYS.risk2, body.id, "reject");
      expect(late.status, late.text).to.equal(409);
      expect(late.body.message).to.match(new RegExp(`^id: trade ${body.id} is `));
      // Found by its hash too, now it has one.
      expect((await trade(KEYS.desk, done.transactionHash)).body.id).to.equal(body.id);
      expect(await nonce()).to.equal(before + 1);
      // The audit log has the hold and the approval, by the approver.
      const audit = await getJson(url("/api/v1/audit?limit=1000"), { apiKey: KEYS.admin });
      const mine = audit.body.records.filter((r: JsonBody) => r.subject === body.id);
      expect(mine.map((r: JsonBody) => [r.action, r.actor])).to.deep.include.members([
        ["trade.accepted", "desk"],
        ["trade.held", "desk"],
        ["trade.approved", "risk-1"],
      ]);
    });

    it("runs a trade at or below the threshold at once", async function () {
      const before = await nonce();
      const answer = await buy(KEYS.desk, "100");
      expect(answer.status, answer.text).to.equal(200);
      expect(answer.body.status).to.equal(true);
      expect(await nonce()).to.equal(before + 1);
    });

    it("rejects a trade for good, nothing paid: its keyed retry is told so, and no later approval runs it", async function () {
      const before = await nonce();
      const key = randomUUID();
      const body = await held(KEYS.desk, "150", { "idempotency-key": key });
      const retry = await buy(KEYS.desk, "150", { "idempotency-key": key });
      expect(retry.status, retry.text).to.equal(202);
      expect(retry.body.id).to.equal(body.id);
      const rejected = await decide(KEYS.risk1, body.id, "reject", { reason: "customer unknown" });
      expect(rejected.status, rejected.text).to.equal(200);
      expect(rejected.body.status).to.equal("rejected");
      expect(rejected.body.approval.rejection).to.deep.include({ by: "risk-1", reason: "customer unknown" });
      const after = await buy(KEYS.desk, "150", { "idempotency-key": key });
      expect(after.status, after.text).to.equal(409);
      expect(after.body.message).to.equal(
        'trade rejected by approver "risk-1" (customer unknown); nothing was signed or paid',
      );
      const approve = await decide(KEYS.risk2, body.id, "approve");
      expect(approve.status, approve.text).to.equal(409);
      expect(approve.body.code).to.equal("aborted");
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await nonce(), "nothing paid").to.equal(before);
    });

    it("expires a trade not approved in time, nothing paid, and gives its room in the limit back", async function () {
      const before = await nonce();
      const body = await held(KEYS.quick, "150");
      // Its 150 USD are held against the 200 of "quick hourly".
      const refused = await buy(KEYS.quick, "60");
      expect(refused.status, refused.text).to.equal(429);
      expect(refused.body.message).to.match(/^spending limit "quick hourly"/);
      expect(refused.body.message).to.include("150 of 200 USD used");
      expect(await nonce()).to.equal(before);
      let view: JsonBody;
      await waitFor(
        "the held trade expired",
        async () => {
          view = (await trade(KEYS.quick, body.id)).body;
          return view.status !== "pending_approval";
        },
        15_000,
        200,
      );
      expect(view.status).to.equal("expired");
      expect(view.error.code).to.equal("approval_expired");
      const approve = await decide(KEYS.risk1, body.id, "approve");
      expect(approve.status, approve.text).to.equal(409);
      expect(await nonce(), "nothing paid").to.equal(before);
      const now = await buy(KEYS.quick, "60");
      expect(now.status, `its room is back: ${now.text}`).to.equal(200);
      expect(await nonce()).to.equal(before + 1);
    });

    it("lets no key approve its own trade, no viewer, and no approver that does not see the key that sent it", async function () {
      const before = await nonce();
      const own = await held(KEYS.self, "150");
      const self = await decide(KEYS.self, own.id, "approve");
      expect(self.status, self.text).to.equal(403);
      expect(self.body).to.deep.equal({
        code: "permission_denied",
        message: 'api key "self" may not approve or reject its own trade: another approver must',
      });
      const desks = await held(KEYS.desk, "150");
      const viewer = await decide(KEYS.viewer, desks.id, "approve");
      expect(viewer.status, viewer.text).to.equal(403);
      expect(viewer.body.message).to.equal(
        'api key "viewer" may not approve or reject trades: its roles are viewer (it needs approver)',
      );
      const blind = await decide(KEYS.blind, desks.id, "approve");
      expect(blind.status, blind.text).to.equal(404);
      expect(blind.body.message).to.equal(`id: no trade of yours is ${desks.id}`);
      const list = await getJson(url("/api/v1/approvals"), { apiKey: KEYS.blind });
      expect(list.body.trades.map((t: JsonBody) => t.id)).to.not.include(desks.id);
      expect((await getJson(url("/api/v1/approvals"), { apiKey: KEYS.viewer })).status).to.equal(403);
      // The key's own trade is not among those it may approve.
      const selfList = await getJson(url("/api/v1/approvals"), { apiKey: KEYS.self });
      expect(selfList.body.trades.map((t: JsonBody) => t.id)).to.not.include(own.id);
      expect((await trade(KEYS.desk, desks.id)).body.status).to.equal("pending_approval");
      expect(await nonce(), "nothing sent").to.equal(before);
      for (const id of [own.id, desks.id]) expect((await decide(KEYS.risk2, id, "reject")).status).to.equal(200);
    });

    it("needs two distinct approvers where a rule asks for two", async function () {
      const before = await nonce();
      const body = await held(KEYS.desk, "1500");
      expect(body.approval.rules).to.deep.equal(["large payouts", "huge payouts"]);
      expect(body.approval.required).to.equal(2);
      const first = await decide(KEYS.risk1, body.id, "approve");
      expect(first.status, first.text).to.equal(200);
      expect(first.body.status).to.equal("pending_approval");
      const twice = await decide(KEYS.risk1, body.id, "approve");
      expect(twice.status, twice.text).to.equal(200);
      expect(twice.body.approval.approvals).to.have.length(1);
      // Not among the trades risk-1 may still approve; still among risk-2's.
      const list1 = await getJson(url("/api/v1/approvals"), { apiKey: KEYS.risk1 });
      expect(list1.body.trades.map((t: JsonBody) => t.id)).to.not.include(body.id);
      const list2 = await getJson(url("/api/v1/approvals"), { apiKey: KEYS.risk2 });
      expect(list2.body.trades.map((t: JsonBody) => t.id)).to.include(body.id);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await nonce(), "one approval of two: nothing sent").to.equal(before);
      const second = await decide(KEYS.risk2, body.id, "approve");
      expect(second.status, second.text).to.equal(200);
      expect(second.body.approval.approvals.map((a: JsonBody) => a.by)).to.deep.equal(["risk-1", "risk-2"]);
      const done = await paid(body.id);
      expect(done.status, JSON.stringify(done.error)).to.be.oneOf(["mined", "confirmed"]);
      expect(await nonce(), "paid once").to.equal(before + 1);
    });

    it("answers a keyed retry 202 while the trade waits, then its receipt", async function () {
      const before = await nonce();
      const key = randomUUID();
      const body = await held(KEYS.desk, "150", { "idempotency-key": key });
      const waiting = await buy(KEYS.desk, "150", { "idempotency-key": key });
      expect(waiting.status, waiting.text).to.equal(202);
      expect(waiting.body).to.deep.include({ id: body.id, status: "pending_approval" });
      expect(waiting.headers.get("location")).to.equal(`/api/v1/trades/${body.id}`);
      expect((await decide(KEYS.risk2, body.id, "approve")).status).to.equal(200);
      let receipt: JsonBody;
      await waitFor(
        "the retry answered with the receipt",
        async () => {
          const answer = await buy(KEYS.desk, "150", { "idempotency-key": key });
          receipt = answer.body;
          return answer.status === 200;
        },
        60_000,
        200,
      );
      expect(receipt.status).to.equal(true);
      expect(receipt.transactionHash).to.equal((await trade(KEYS.desk, body.id)).body.transactionHash);
      expect((await buy(KEYS.desk, "150", { "idempotency-key": key })).body.transactionHash).to.equal(
        receipt.transactionHash,
      );
      expect(await nonce(), "paid once").to.equal(before + 1);
    });

    /** A sell of 100 tokens by desk under a fresh quote (slippage 0.5 %), held: its 202 and the quote. */
    async function heldUnderQuote(): Promise<{ body: JsonBody; quote: JsonBody }> {
      const quote = await postJson(
        url("/api/v1/token/quote"),
        { kind: "sell", amount: "100", usdAddress: DAI, destinatary: CUSTOMER, slippageBps: 50 },
        { apiKey: KEYS.desk },
      );
      expect(quote.status, quote.text).to.equal(200);
      const before = await nonce();
      const answer = await postJson(
        url("/api/v1/token/sell"),
        { userAddress: WALLET.address, destinatary: CUSTOMER, amount: "100", usdAddress: DAI },
        { apiKey: KEYS.desk, headers: { "quote-id": quote.body.quoteId } },
      );
      expect(answer.status, answer.text).to.equal(202);
      expect(answer.body.approval.quote).to.deep.equal({
        quoteId: quote.body.quoteId,
        minOut: quote.body.minOut.baseUnits,
        expiresAt: quote.body.expiresAt,
      });
      expect(await nonce()).to.equal(before);
      return { body: answer.body, quote: quote.body };
    }

    it("fails an approved trade whose price moved past its quote's minimum, nothing paid", async function () {
      const { body } = await heldUnderQuote();
      await (await feed.getFunction("updateAnswer")((price * 99n) / 100n)).wait(); // −1 %, past the 0.5 %
      const before = await nonce();
      expect((await decide(KEYS.risk1, body.id, "approve")).status).to.equal(200);
      const done = await paid(body.id);
      expect(done.status).to.equal("failed");
      expect(done.error.code).to.equal("quote_slippage");
      expect(done.transactionHash).to.equal(null);
      expect(await nonce(), "nothing paid").to.equal(before);
    });

    it("fails an approved trade whose quote expired before the approval (quote_expired), nothing paid", async function () {
      const { body, quote } = await heldUnderQuote();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(quote.expiresAt) - Date.now()) + 100));
      const before = await nonce();
      expect((await decide(KEYS.risk1, body.id, "approve")).status).to.equal(200);
      const done = await paid(body.id);
      expect(done.status).to.equal("failed");
      expect(done.error.code).to.equal("quote_expired");
      expect(await nonce(), "nothing paid").to.equal(before);
      // The refusal is in the audit log, with the code.
      const audit = await getJson(url("/api/v1/audit?action=trade.refused&limit=1000"), { apiKey: KEYS.admin });
      const refusal = audit.body.records.find((r: JsonBody) => r.subject === body.id);
      expect(refusal.details.code).to.equal("quote_expired");
    });

    it("shows held, approved and rejected trades in the history, its CSV and the summary", async function () {
      const body = await held(KEYS.desk, "150");
      const history = (status: string, accept?: string) =>
        getJson(url(`/api/v1/trades?status=${status}&limit=500`), {
          apiKey: KEYS.desk,
          ...(accept && { headers: { accept } }),
        });
      const pending = await history("pending_approval");
      expect(pending.status, pending.text).to.equal(200);
      const shown = pending.body.trades.find((t: JsonBody) => t.id === body.id);
      expect(shown.approval.rules).to.deep.equal(["large payouts"]);
      const rejected = await history("rejected");
      expect(rejected.body.trades.length).to.be.at.least(1);
      for (const t of rejected.body.trades) expect(t.approval.rejection.by).to.be.a("string");
      const csv = await history("rejected", "text/csv");
      const [header, first] = csv.text.split("\r\n");
      expect(header!.split(",").slice(-2)).to.deep.equal(["approvedBy", "rejectedBy"]);
      expect(first!.split(",").at(-1)).to.equal(rejected.body.trades[0].approval.rejection.by);
      const approved = await history("confirmed", "text/csv");
      expect(approved.text).to.match(/,risk-1 risk-2,\r\n/); // the trade that needed two
      const summary = await getJson(url("/api/v1/trades/summary"), { apiKey: KEYS.desk });
      const buys = summary.body.groups.find((g: JsonBody) => g.kind === "buy");
      expect(buys.statuses.pending_approval).to.be.at.least(1);
      expect(buys.statuses.rejected).to.be.at.least(1);
      expect((await decide(KEYS.risk1, body.id, "reject")).status).to.equal(200);
    });

    it("tells desk's webhook of each trade held, approved and rejected, naming the approver", async function () {
      // Both held first: the approved one's run signs in the background, and held() checks the nonce.
      const kept = await held(KEYS.desk, "150");
      const dropped = await held(KEYS.desk, "150");
      expect((await decide(KEYS.risk2, kept.id, "approve", { reason: "fine" })).status).to.equal(200);
      expect((await decide(KEYS.risk1, dropped.id, "reject", { reason: "no" })).status).to.equal(200);
      const of = (id: string, type: string) =>
        receiver.received.find((e) => e.data.id === id && e.type === type) as { data: JsonBody } | undefined;
      await receiver.until(
        () => of(dropped.id, "trade.rejected") !== undefined && of(kept.id, "trade.approved") !== undefined,
      );
      expect(receiver.rejected).to.equal(0);
      expect(of(kept.id, "trade.pending_approval")!.data.approval.rules).to.deep.equal(["large payouts"]);
      expect(of(kept.id, "trade.approved")!.data.approval.approvals[0]).to.deep.include({
        by: "risk-2",
        reason: "fine",
      });
      expect(of(dropped.id, "trade.rejected")!.data.approval.rejection).to.deep.include({ by: "risk-1", reason: "no" });
      expect(of(dropped.id, "trade.rejected")!.data.status).to.equal("rejected");
      // The approved one goes on to be paid, and is told so.
      await receiver.until(() => of(kept.id, "trade.confirmed") !== undefined);
    });

    it("answers gRPC failed_precondition with trade-id and trade-status, and approves over gRPC", async function () {
      const before = await nonce();
      const request = { user_address: WALLET.address, destinatary: CUSTOMER, amount: "150", usd_address: DAI };
      const held = await grpcCall(client, "Buy", request, KEYS.desk);
      expect(held.error?.code, held.error?.message).to.equal(grpc.status.FAILED_PRECONDITION);
      const id = String(held.error!.metadata.get("trade-id")[0]);
      expect(held.error!.metadata.get("trade-status")).to.deep.equal(["pending_approval"]);
      expect(await nonce()).to.equal(before);
      const got = await grpcCall(client, "GetTrade", { id }, KEYS.desk);
      expect(got.error).to.equal(undefined);
      expect(got.response).to.deep.include({ id, status: "pending_approval" });
      const listed = await grpcCall(client, "ListApprovals", { status: "pending" }, KEYS.risk1);
      expect((listed.response as JsonBody).trades.map((t: JsonBody) => t.id)).to.include(id);
      const own = await grpcCall(client, "ApproveTrade", { id }, KEYS.desk);
      expect(own.error?.code).to.equal(grpc.status.PERMISSION_DENIED);
      // Connect (JSON over HTTP): the same code, the metadata as headers.
      const connect = await fetch(url("/tokentrade.v1.TokenService/Buy"), {
        method: "POST",
        headers: { "content-type": "application/json", api_key: KEYS.desk },
        body: JSON.stringify({ userAddress: WALLET.address, destinatary: CUSTOMER, amount: "150", usdAddress: DAI }),
      });
      expect(((await connect.json()) as JsonBody).code).to.equal("failed_precondition");
      const connectId = connect.headers.get("trade-id");
      expect(connectId).to.match(/^[0-9a-f-]{36}$/);
      expect(connect.headers.get("trade-status")).to.equal("pending_approval");
      const rejected = await grpcCall(client, "RejectTrade", { id: connectId, reason: "duplicate" }, KEYS.risk1);
      expect((rejected.response as JsonBody).status).to.equal("rejected");
      // gRPC-Web (binary): the same, in its trailers (a headers-only answer, or the trailer frame).
      const message = toBinary(
        TradeRequestSchema,
        create(TradeRequestSchema, {
          userAddress: WALLET.address,
          destinatary: CUSTOMER,
          amount: "150",
          usdAddress: DAI,
        }),
      );
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
      frame.writeUInt32BE(message.length, 1);
      const web = await fetch(url("/tokentrade.v1.TokenService/Buy"), {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", api_key: KEYS.desk },
        body: frame,
      });
      const bytes = Buffer.from(await web.arrayBuffer());
      const trailers = `${[...web.headers].map(([k, v]) => `${k}:${v}`).join("\r\n")}\r\n${bytes.subarray(5).toString()}`;
      expect(trailers).to.match(/grpc-status: ?9\r\n/);
      const webId = /trade-id: ?([0-9a-f-]{36})/.exec(trailers)?.[1];
      expect(webId, trailers).to.be.a("string");
      expect(trailers).to.match(/trade-status: ?pending_approval/);
      expect((await decide(KEYS.risk1, webId!, "reject")).status).to.equal(200);
      const approved = await grpcCall(client, "ApproveTrade", { id, reason: "ok" }, KEYS.risk1);
      expect(approved.error).to.equal(undefined);
      expect((approved.response as JsonBody).approval.approvals[0].by).to.equal("risk-1");
      const done = await paid(id);
      expect(done.status, JSON.stringify(done.error)).to.be.oneOf(["mined", "confirmed"]);
      expect(await nonce()).to.equal(before + 1);
    });
  });
}
