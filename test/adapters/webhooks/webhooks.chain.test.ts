/**
 * Webhooks end to end on the embedded chain (npm start's composition, a real SQLite journal):
 * WEBHOOKS_FILE names the api key's endpoint, real trades are made, and a node:http receiver
 * verifies every delivery with the `standardwebhooks` package. The operations routes list the
 * caller's deliveries with each attempt, and refuse to retry one that did not fail.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { startEmbeddedService, type EmbeddedService } from "../transport/chain-helpers.js";
import { getJson, postJson, type JsonBody } from "../transport/helpers.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";

const KEY = "webhooks-api-key-0123456789abcdef";
const OTHER_KEY = "webhooks-other-key-0123456789abcd";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

export function apiKeyId(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 32);
}

describe("webhooks end to end on the embedded chain", function () {
  this.timeout(120_000);
  let s: EmbeddedService;
  let receiver: WebhookReceiver;
  let dir: string;
  const hashes: string[] = [];

  before(async function () {
    receiver = await startWebhookReceiver();
    dir = mkdtempSync(join(tmpdir(), "webhooks-"));
    const file = join(dir, "webhooks.json");
    writeFileSync(
      file,
      JSON.stringify({ endpoints: [{ apiKeyId: apiKeyId(KEY), url: receiver.url, secrets: [receiver.secret] }] }),
    );
    s = await startEmbeddedService(`${KEY},${OTHER_KEY}`, {
      WEBHOOKS_FILE: file,
      WEBHOOK_ALLOW_INSECURE: "true",
      WEBHOOK_ALLOW_PRIVATE: "true",
    });
    for (const key of [KEY, KEY, OTHER_KEY]) {
      const answer = await postJson(
        `${s.service.apiUrl}/api/v1/token/sell`,
        {
          userAddress: s.wallet,
          destinatary: CUSTOMER,
          amount: "10",
          usdAddress: s.service.addresses.stableCoins.USDT,
        },
        { apiKey: key },
      );
      expect(answer.status, answer.text).to.equal(200);
      if (key === KEY) hashes.push(answer.body.transactionHash);
    }
  });

  after(async function () {
    await s?.close();
    await receiver?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers each trade of the key with an endpoint, submitted then confirmed, verified by standardwebhooks", async function () {
    await receiver.until(() => receiver.received.filter((e) => e.type === "trade.confirmed").length === 2);
    expect(receiver.rejected).to.equal(0);
    for (const hash of hashes) {
      const trade = await getJson(`${s.service.apiUrl}/api/v1/trades/${hash}`, { apiKey: KEY });
      const types = receiver.received.filter((e) => e.data.id === trade.body.id).map((e) => e.type);
      expect(types.at(-1)).to.equal("trade.confirmed");
      expect(types[0]).to.be.oneOf(["trade.submitted", "trade.confirmed"]);
      const confirmed = receiver.received.find((e) => e.data.id === trade.body.id && e.type === "trade.confirmed")!;
      // As GET shows it, but for what the chain tells GET at the time it is asked.
      const { confirmations: _c, updatedAt: _u, ...asDelivered } = confirmed.data;
      const { confirmations: _c2, updatedAt: _u2, ...asShown } = trade.body;
      expect(asDelivered).to.deep.equal(asShown);
    }
    expect(new Set(receiver.received.map((e) => e.data.id)).size).to.equal(2); // none of the other key's
  });

  it("lists the caller's deliveries with each attempt, and refuses to retry one that did not fail", async function () {
    await receiver.until(() => receiver.received.filter((e) => e.type === "trade.confirmed").length === 2);
    // The last answer reaches the receiver before the deliverer records it.
    let list = await getJson(`${s.service.apiUrl}/api/v1/webhooks/deliveries?status=delivered`, { apiKey: KEY });
    for (let i = 0; i < 100 && list.body.deliveries?.length !== receiver.received.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      list = await getJson(`${s.service.apiUrl}/api/v1/webhooks/deliveries?status=delivered`, { apiKey: KEY });
    }
    expect(list.status, list.text).to.equal(200);
    const deliveries = list.body.deliveries as JsonBody[];
    expect(deliveries.length).to.equal(receiver.received.length);
    for (const d of deliveries) {
      expect(d.status).to.equal("delivered");
      expect(d.attempts).to.have.length(1);
      expect(d.attempts[0].statusCode).to.equal(204);
    }
    const other = await getJson(`${s.service.apiUrl}/api/v1/webhooks/deliveries`, { apiKey: OTHER_KEY });
    expect(other.body).to.deep.equal({ deliveries: [], nextCursor: null });
    const retry = await postJson(
      `${s.service.apiUrl}/api/v1/webhooks/deliveries/${deliveries[0].id}/retry`,
      {},
      { apiKey: KEY },
    );
    expect(retry.status).to.equal(409);
    expect(retry.body.code).to.equal("failed_precondition");
    const stranger = await postJson(
      `${s.service.apiUrl}/api/v1/webhooks/deliveries/${deliveries[0].id}/retry`,
      {},
      { apiKey: OTHER_KEY },
    );
    expect(stranger.status).to.equal(404);
    const bad = await getJson(`${s.service.apiUrl}/api/v1/webhooks/deliveries?status=lost`, { apiKey: KEY });
    expect(bad.status).to.equal(400);
  });

  it("reports the deliveries by outcome and the queue's depth in the metrics", async function () {
    const text = await (await fetch(s.service.metricsUrl!)).text();
    expect(text).to.match(/webhook_deliveries_total\{outcome="delivered"\} [1-9]/);
    expect(text).to.match(/webhook_queue_depth 0/);
    expect(text).to.match(/webhook_oldest_pending_age_seconds 0/);
  });
});
