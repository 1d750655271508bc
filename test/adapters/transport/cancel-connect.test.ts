/**
 * CancelTrade and SpeedUpTrade over Connect (binary and JSON) and gRPC-Web, on HTTP/1.1, as a
 * browser or a Connect client calls them: the same answers and codes as over gRPC
 * (test/adapters/transport/cancel.anvil.test.ts calls them with @grpc/grpc-js on a real chain).
 * The wallets' monitors are a replacer that records what it is asked.
 */
import { createHash } from "node:crypto";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { expect } from "chai";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import {
  heldEntry,
  newApproval,
  type ReplaceTarget,
  type Replacement,
  type TradeReplacer,
} from "../../../core/index.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  HTTP1_TRANSPORTS,
  OTHER_KEY,
  startTestServer,
  type TestServer,
  WALLET,
} from "./helpers.js";

/** The scope the service gives API_KEY (api-key.ts): the first 16 bytes of its SHA-256, hex. */
const SCOPE = createHash("sha256").update(API_KEY).digest("hex").slice(0, 32);
const REQUEST = { userAddress: WALLET, destinatary: CUSTOMER, amount: "10", usdAddress: DAI.address };

/** The wallets' monitors: each call recorded; a cancel's no-op deferred (sent by a later look), a speed-up signing nothing. */
class RecordingReplacer implements TradeReplacer {
  readonly calls: Array<{ what: string; target: ReplaceTarget; maxFeePerGas?: bigint }> = [];

  async cancel(target: ReplaceTarget): Promise<Replacement> {
    this.calls.push({ what: "cancel", target });
    return { state: "deferred", reason: "recorded" };
  }

  async speedUp(target: ReplaceTarget, maxFeePerGas?: bigint): Promise<Replacement> {
    this.calls.push({ what: "speedUp", target, ...(maxFeePerGas !== undefined && { maxFeePerGas }) });
    return { state: "unchanged", reason: "the fees leave no room" };
  }
}

describe("CancelTrade and SpeedUpTrade over Connect and gRPC-Web", function () {
  let t: TestServer;
  let journal: MemoryJournal;
  let replacer: RecordingReplacer;
  let nonce = 0;

  before(async function () {
    journal = new MemoryJournal();
    replacer = new RecordingReplacer();
    t = await startTestServer({ journal, replacer });
    // The chain holds every signed trade's transaction, unmined.
    t.trade.resolve = async () => ({ state: "pending" });
  });

  after(async function () {
    await t.close();
  });

  /** A buy of API_KEY's, accepted. */
  async function openTrade() {
    const { record } = await journal.open({
      scope: SCOPE,
      idempotencyKey: null,
      requestHash: "h",
      kind: "buy",
      request: REQUEST,
    });
    return record;
  }

  /** A trade of API_KEY's, held for an approval: nothing signed. */
  async function heldTrade(): Promise<string> {
    const record = await openTrade();
    const rule = { name: "big", aboveUsd: 0n, approvers: 1, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
    const approval = newApproval([rule], Date.now());
    await journal.hold(record.id, approval, heldEntry({ id: SCOPE }, record.id, approval));
    return record.id;
  }

  /** A trade of API_KEY's, signed and submitted at a nonce of its own. */
  async function pendingTrade(): Promise<{ id: string; nonce: number }> {
    const record = await openTrade();
    nonce += 1;
    await journal.markSigned(record.id, {
      wallet: WALLET,
      nonce,
      txHash: `0x${nonce.toString(16).padStart(64, "e")}`,
      rawTx: "0x02f8",
      maxFeePerGas: 20n,
      maxPriorityFeePerGas: 2n,
      deadline: 2_000_000_000,
    });
    await journal.markSubmitted(record.id);
    return { id: record.id, nonce };
  }

  async function codeOf(call: Promise<unknown>): Promise<{ code: Code; message: string } | "answered"> {
    return call.then(
      () => "answered" as const,
      (error: unknown) => {
        const connect = ConnectError.from(error);
        return { code: connect.code, message: connect.rawMessage };
      },
    );
  }

  for (const [name, transport] of HTTP1_TRANSPORTS) {
    describe(`over ${name}`, function () {
      const withKey = { headers: { api_key: API_KEY } };

      it("cancels a held trade at once, and has a pending one's transaction replaced, with its cancel in the answer", async function () {
        const client = createClient(TokenService, transport(t.url));
        const held = await heldTrade();
        const cancelled = await client.cancelTrade({ id: held }, withKey);
        expect([cancelled.id, cancelled.status, cancelled.cancel?.outcome]).to.deep.equal([held, "cancelled", "done"]);
        expect(cancelled.error?.code).to.equal("trade_cancelled");

        const pending = await pendingTrade();
        const asked = await client.cancelTrade({ id: pending.id }, withKey);
        expect([asked.status, asked.cancel?.outcome, asked.cancel?.requestedBy]).to.deep.equal([
          "submitted",
          "pending",
          SCOPE,
        ]);
        expect(replacer.calls.at(-1)).to.deep.include({ what: "cancel" });
        expect(replacer.calls.at(-1)!.target).to.deep.include({ tradeId: pending.id, nonce: pending.nonce });
        // Asked again: the same answer, nothing asked of the monitors.
        const calls = replacer.calls.length;
        expect((await client.cancelTrade({ id: pending.id }, withKey)).cancel?.outcome).to.equal("pending");
        expect(replacer.calls).to.have.length(calls);
      });

      it("speeds a pending trade up at the fee asked, and refuses as gRPC does, signing nothing", async function () {
        const client = createClient(TokenService, transport(t.url));
        const pending = await pendingTrade();
        const sped = await client.speedUpTrade({ id: pending.id, maxFeePerGasGwei: "2.5" }, withKey);
        expect(sped.status).to.equal("submitted");
        expect(replacer.calls.at(-1)).to.deep.include({ what: "speedUp", maxFeePerGas: 2_500_000_000n });
        const calls = replacer.calls.length;

        const malformed = await codeOf(
          client.speedUpTrade({ id: pending.id, maxFeePerGasGwei: "2.5000000001" }, withKey),
        );
        expect(malformed).to.deep.include({ code: Code.InvalidArgument });
        expect((malformed as { message: string }).message).to.match(/maxFeePerGasGwei/);
        expect(await codeOf(client.cancelTrade({ id: "not-a-uuid" }, withKey))).to.deep.include({
          code: Code.InvalidArgument,
        });
        // Not its trade: not found, as GetTrade answers.
        expect(
          await codeOf(client.cancelTrade({ id: pending.id }, { headers: { api_key: OTHER_KEY } })),
        ).to.deep.include({ code: Code.NotFound });
        // Nothing of it signed: nothing to re-price.
        const held = await heldTrade();
        const refused = await codeOf(client.speedUpTrade({ id: held }, withKey));
        expect(refused).to.deep.include({ code: Code.FailedPrecondition });
        expect((refused as { message: string }).message).to.match(
          /is pending approval \(nothing of it is signed yet\)/,
        );
        expect(await codeOf(client.cancelTrade({ id: pending.id }))).to.deep.include({ code: Code.Unauthenticated });
        expect(replacer.calls).to.have.length(calls);
      });
    });
  }
});
