/**
 * Webhook deliverers as the instances of a deployment run them: two journals (each its own
 * pool, as two processes have) on one real PostgreSQL, each with its deliverer, and real
 * receivers over HTTP that verify every delivery with the `standardwebhooks` package. A receiver
 * that never answers delays no other (each endpoint its own lane, and the fast one's latencies
 * printed beside and without it), and instances with different files each deliver their own
 * scopes, failing none of the others'.
 */
import { expect } from "chai";
import pino from "pino";

import { type Journal, openPostgresJournal } from "../../../adapters/journal/index.js";
import { WebhookDeliverer, type WebhookEndpoint } from "../../../adapters/webhooks/deliverer.js";
import { WebhookSecret } from "../../../adapters/webhooks/signature.js";
import { wakingJournal } from "../../../adapters/webhooks/waking-journal.js";
import { startPostgres, type TestPostgres } from "../../helpers/postgres.js";
import { type ReceivedEvent, startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { runTrade, WEBHOOK_SCOPE } from "../../helpers/webhook-trades.js";

const log = pino({ level: "silent" });
const FAST_SCOPE = WEBHOOK_SCOPE;
const SLOW_SCOPE = "fedcba9876543210fedcba9876543210";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** From each event's change (its `timestamp`, the trade's updatedAt) to its arrival, sorted. */
function latencies(events: readonly ReceivedEvent[]): number[] {
  return events.map((event) => event.at - Date.parse(event.timestamp)).sort((a, b) => a - b);
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

const summary = (sorted: readonly number[]) =>
  `p50 ${percentile(sorted, 50)} ms, p90 ${percentile(sorted, 90)} ms, max ${sorted.at(-1)} ms (${sorted.length} events)`;

describe("webhook deliverers of two instances on one PostgreSQL journal", function () {
  this.timeout(180_000);
  let server: TestPostgres;
  let journals: Journal[];
  let deliverers: WebhookDeliverer[];
  let receivers: WebhookReceiver[];

  before(async function () {
    server = await startPostgres();
  });

  after(async function () {
    await server?.stop();
  });

  beforeEach(async function () {
    const url = await server.newDatabase();
    journals = [await openPostgresJournal(url, { max: 4 }), await openPostgresJournal(url, { max: 4 })];
    deliverers = [];
    receivers = [];
  });

  afterEach(async function () {
    // The receivers first: a hanging answer is cut, so each deliverer's attempts end at once.
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await Promise.all(deliverers.map((deliverer) => deliverer.close()));
    await Promise.all(journals.map((journal) => journal.close()));
  });

  function endpoint(receiver: WebhookReceiver): WebhookEndpoint {
    return { url: new URL(receiver.url), secrets: [WebhookSecret.parse(receiver.secret)] };
  }

  /**
   * Each instance's journal as the service wraps it (a write that adds an event wakes its
   * deliverer), with its deliverer, given the endpoints of its own file.
   */
  function startDeliverers(files: ReadonlyArray<ReadonlyMap<string, WebhookEndpoint>>): Journal[] {
    return journals.map((journal, i) => {
      const deliverer = new WebhookDeliverer({
        outbox: journal,
        endpoints: files[i]!,
        log,
        holder: `instance-${i}`,
        allowPrivate: true,
      });
      deliverer.start();
      deliverers.push(deliverer);
      return wakingJournal(journal, () => deliverer.wake());
    });
  }

  it("delivers to a receiver that answers at once as fast while another receiver never answers", async function () {
    const [fast, slow] = [await startWebhookReceiver(), await startWebhookReceiver()];
    receivers.push(fast, slow);
    for (const [i, journal] of journals.entries())
      await journal.registerWebhookScopes(`instance-${i}`, [FAST_SCOPE, SLOW_SCOPE], 60_000);
    // Both instances have the same file: both endpoints.
    const file = new Map([
      [FAST_SCOPE, endpoint(fast)],
      [SLOW_SCOPE, endpoint(slow)],
    ]);
    const instances = startDeliverers([file, file]);
    /** `count` trades of the fast scope, one every 50 ms, through each instance in turn; its events' latencies. */
    const fastTrades = async (count: number) => {
      const from = fast.received.length;
      for (let i = 0; i < count; i++) {
        await runTrade(instances[i % 2]!, FAST_SCOPE);
        await sleep(50);
      }
      await fast.until(() => fast.received.length === from + count * 3, 90_000);
      return latencies(fast.received.slice(from));
    };

    // Without the stuck receiver: its scope has no trades.
    await fastTrades(3); // warm-up: connections, the JIT
    const alone = await fastTrades(20);

    // With it: its receiver holds every request open, and has more trades waiting than both
    // instances' deliverers used to claim at once (32 each).
    slow.mode = "hang";
    for (let i = 0; i < 80; i++) await runTrade(instances[i % 2]!, SLOW_SCOPE);
    await slow.until(() => slow.requests > 0, 10_000);
    const beside = await fastTrades(20);

    console.log(`      fast receiver alone:              ${summary(alone)}`);
    console.log(`      beside one that never answers:    ${summary(beside)}`);
    expect(slow.received, "the stuck receiver answered nothing").to.have.length(0);
    expect(fast.rejected).to.equal(0);
    // An attempt on the stuck receiver takes its whole 10 s timeout: a fast event that waited on
    // one would show it. 3 s leaves a loaded CI machine its margin.
    expect(beside.at(-1), summary(beside)).to.be.below(3_000);
    // In order per trade, as ever.
    for (const tradeId of new Set(fast.received.map((event) => event.data.id)))
      expect(fast.received.filter((event) => event.data.id === tradeId).map((event) => event.type)).to.deep.equal([
        "trade.submitted",
        "trade.replaced",
        "trade.confirmed",
      ]);
  });

  it("delivers each scope from the instance that has its endpoint, failing none, when the instances' files differ", async function () {
    receivers.push(await startWebhookReceiver(), await startWebhookReceiver());
    // Instance 0's file has the fast scope only, instance 1's the slow one only.
    const files = [FAST_SCOPE, SLOW_SCOPE].map((scope, i) => new Map([[scope, endpoint(receivers[i]!)]]));
    for (const [i, journal] of journals.entries())
      await journal.registerWebhookScopes(`instance-${i}`, [...files[i]!.keys()], 60_000);
    const instances = startDeliverers(files);
    const trades: Array<[string, string]> = [];
    for (let i = 0; i < 6; i++)
      for (const scope of [FAST_SCOPE, SLOW_SCOPE]) trades.push([scope, await runTrade(instances[i % 2]!, scope)]);
    for (const receiver of receivers) await receiver.until(() => receiver.received.length === 18);
    await sleep(500); // nothing more arrives
    for (const [i, scope] of [FAST_SCOPE, SLOW_SCOPE].entries()) {
      const receiver = receivers[i]!;
      expect(receiver.rejected).to.equal(0);
      expect(new Set(receiver.received.map((event) => event.data.id))).to.deep.equal(
        new Set(trades.filter(([s]) => s === scope).map(([, id]) => id)),
      );
      const { deliveries } = await journals[0]!.listWebhookDeliveries({ scopes: [scope], limit: 100 });
      expect(deliveries).to.have.length(18);
      for (const delivery of deliveries) {
        expect(delivery.status).to.equal("delivered");
        expect(delivery.history.map((attempt) => attempt.error)).to.deep.equal([null]);
      }
    }
  });
});
