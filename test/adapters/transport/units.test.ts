import { createHash } from "node:crypto";
import { createRequire, syncBuiltinESMExports } from "node:module";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { expect } from "chai";
import fc from "fast-check";

import {
  ChainUnavailableError,
  FeesTooHighError,
  TradeDroppedError,
  TradeExpiredError,
  TradeNotFoundError,
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InsufficientFundsError,
  InvalidArgumentError,
  PriceUnavailableError,
  TradePendingError,
  TradeRevertedError,
  UnknownWalletError,
  QuoteExpiredError,
  QuoteMismatchError,
  QuoteNotFoundError,
  QuoteSlippageError,
  QuoteUsedError,
  createUseCases,
  type DomainErrorCode,
} from "../../../core/index.js";
import { TokenService, TradeRequestSchema } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  MISSING_KEY_MESSAGE,
  WRONG_KEY_MESSAGE,
  createApiKeyVerifier,
  newRequestId,
  requestPath,
} from "../../../adapters/transport/request/index.js";
import {
  DOMAIN_HTTP_STATUS,
  DOMAIN_TO_CONNECT_CODE,
  INTERNAL_MESSAGE,
  TokenServiceImpl,
  codeName,
  grpcPercentEncode,
  httpStatusFor,
  priceMessage,
  receiptMessage,
  toConnectError,
  tradeInputFromMessage,
} from "../../../adapters/transport/rpc/index.js";
import {
  API_KEY,
  CONFIG,
  CUSTOMER,
  DAI,
  FakePricePort,
  FakeTradePort,
  USDT,
  WALLET,
  fakeReceipt,
  startTestServer,
  type TestServer,
} from "./helpers.js";

describe("error mapping", function () {
  it("maps every domain code to one Connect code", function () {
    const expected: Record<DomainErrorCode, Code> = {
      invalid_argument: Code.InvalidArgument,
      permission_denied: Code.PermissionDenied,
      spending_limit_exceeded: Code.ResourceExhausted,
      unknown_wallet: Code.PermissionDenied,
      insufficient_funds: Code.FailedPrecondition,
      trade_reverted: Code.FailedPrecondition,
      price_unavailable: Code.Unavailable,
      chain_unavailable: Code.Unavailable,
      idempotency_mismatch: Code.FailedPrecondition,
      idempotency_in_flight: Code.Aborted,
      trade_cancelled: Code.FailedPrecondition,
      trade_not_replaceable: Code.FailedPrecondition,
      trade_pending: Code.DeadlineExceeded,
      trade_expired: Code.FailedPrecondition,
      trade_dropped: Code.FailedPrecondition,
      trade_not_found: Code.NotFound,
      fees_too_high: Code.Unavailable,
      transaction_refused: Code.Unavailable,
      quote_not_found: Code.NotFound,
      quote_expired: Code.FailedPrecondition,
      quote_used: Code.AlreadyExists,
      quote_mismatch: Code.FailedPrecondition,
      quote_slippage: Code.Aborted,
      webhook_delivery_not_found: Code.NotFound,
      webhook_delivery_not_failed: Code.FailedPrecondition,
      // A held trade is not `unavailable` (which clients retry by themselves): failed_precondition.
      approval_pending: Code.FailedPrecondition,
      approval_conflict: Code.Aborted,
      approval_expired: Code.FailedPrecondition,
      approval_interrupted: Code.Aborted,
      trade_rejected: Code.FailedPrecondition,
      wallet_paused: Code.Unavailable,
      wallet_not_paused: Code.FailedPrecondition,
    };
    expect(DOMAIN_TO_CONNECT_CODE).to.deep.equal(expected);
  });

  it("answers the quote refusals with their own HTTP statuses", function () {
    expect(DOMAIN_HTTP_STATUS.quote_expired).to.equal(410);
    expect(DOMAIN_HTTP_STATUS.quote_mismatch).to.equal(422);
    expect(toConnectError(new QuoteNotFoundError("q_x")).status).to.equal(404);
    expect(toConnectError(new QuoteUsedError("q_x")).status).to.equal(409);
    expect(toConnectError(new QuoteSlippageError(1n, 2n)).status).to.equal(409);
    expect(toConnectError(new QuoteExpiredError("q_x", new Date(0))).status).to.equal(410);
    expect(toConnectError(new QuoteMismatchError("amount", "q_x", "1")).status).to.equal(422);
  });

  it("keeps the message of a domain error and the error as cause", function () {
    const errors = [
      new InvalidArgumentError("amount", "must be greater than 0"),
      new UnknownWalletError(WALLET),
      new InsufficientFundsError("userAddress: not enough tokens"),
      new TradeRevertedError("SwapPaused()"),
      new PriceUnavailableError("stale"),
      new ChainUnavailableError("timeout"),
      new TradeExpiredError(1_900_000_000, 4),
      new TradeDroppedError(WALLET, 4),
      new TradeNotFoundError(`0x${"ab".repeat(32)}`),
      new FeesTooHighError("the chain's base fee is above the cap"),
    ];
    for (const error of errors) {
      const mapped = toConnectError(error);
      expect(mapped.internal).to.equal(false);
      expect(mapped.error.code).to.equal(DOMAIN_TO_CONNECT_CODE[error.code]);
      expect(mapped.error.rawMessage).to.equal(error.message);
      expect(mapped.error.cause).to.equal(error);
    }
  });

  it("hides anything else behind a generic internal error", function () {
    for (const thrown of [new Error("db password is hunter2"), "a string", undefined, { code: "invalid_argument" }]) {
      const mapped = toConnectError(thrown);
      expect(mapped.internal).to.equal(true);
      expect(mapped.error.code).to.equal(Code.Internal);
      expect(mapped.error.rawMessage).to.equal(INTERNAL_MESSAGE);
    }
  });

  it("passes a ConnectError through unchanged", function () {
    const error = new ConnectError("nope", Code.Unauthenticated);
    expect(toConnectError(error)).to.deep.equal({ error, internal: false, status: 401 });
  });

  it("answers a reused Idempotency-Key with 422 on the JSON routes and failed_precondition on RPCs", function () {
    const mapped = toConnectError(new IdempotencyKeyReusedError());
    expect([mapped.error.code, mapped.status]).to.deep.equal([Code.FailedPrecondition, 422]);
    expect(toConnectError(new IdempotencyInFlightError()).status).to.equal(409);
    expect(toConnectError(new TradePendingError("0x01")).status).to.equal(504);
  });

  it("maps codes to HTTP statuses as the Connect protocol does", function () {
    const table: Array<[Code, number, string]> = [
      [Code.Canceled, 499, "canceled"],
      [Code.Unknown, 500, "unknown"],
      [Code.InvalidArgument, 400, "invalid_argument"],
      [Code.DeadlineExceeded, 504, "deadline_exceeded"],
      [Code.NotFound, 404, "not_found"],
      [Code.AlreadyExists, 409, "already_exists"],
      [Code.PermissionDenied, 403, "permission_denied"],
      [Code.ResourceExhausted, 429, "resource_exhausted"],
      [Code.FailedPrecondition, 400, "failed_precondition"],
      [Code.Aborted, 409, "aborted"],
      [Code.OutOfRange, 400, "out_of_range"],
      [Code.Unimplemented, 501, "unimplemented"],
      [Code.Internal, 500, "internal"],
      [Code.Unavailable, 503, "unavailable"],
      [Code.DataLoss, 500, "data_loss"],
      [Code.Unauthenticated, 401, "unauthenticated"],
    ];
    for (const [code, status, name] of table) {
      expect(httpStatusFor(code), name).to.equal(status);
      expect(codeName(code)).to.equal(name);
    }
  });
});

describe("api key verifier", function () {
  const verifier = createApiKeyVerifier([API_KEY, "another-key-abcdefghijkl"]);

  it("accepts each configured key and says which one", function () {
    const scope = (key: string) => createHash("sha256").update(key).digest("hex").slice(0, 32);
    expect(verifier.check(API_KEY)).to.deep.equal({ ok: true, keyIndex: 0, scope: scope(API_KEY) });
    expect(verifier.check("another-key-abcdefghijkl")).to.deep.equal({
      ok: true,
      keyIndex: 1,
      scope: scope("another-key-abcdefghijkl"),
    });
    expect(createApiKeyVerifier(["another-key-abcdefghijkl", API_KEY]).check(API_KEY)).to.deep.include({
      scope: scope(API_KEY),
    });
  });

  it("refuses a missing, empty, wrong, longer or shorter key", function () {
    expect(verifier.check(undefined)).to.deep.equal({ ok: false, message: MISSING_KEY_MESSAGE });
    expect(verifier.check(null)).to.deep.equal({ ok: false, message: MISSING_KEY_MESSAGE });
    expect(verifier.check("")).to.deep.equal({ ok: false, message: MISSING_KEY_MESSAGE });
    // The key twice over matches it code unit for code unit when read cyclically: only its length differs.
    for (const wrong of [
      "nope",
      `${API_KEY}x`,
      API_KEY.slice(1),
      API_KEY.toUpperCase(),
      `${API_KEY},${API_KEY}`,
      `${API_KEY}${API_KEY}`,
      `${API_KEY.slice(0, -1)}\u0000`,
    ]) {
      expect(verifier.check(wrong), wrong).to.deep.equal({ ok: false, message: WRONG_KEY_MESSAGE });
    }
  });

  it("never puts the key into its messages", function () {
    expect(WRONG_KEY_MESSAGE).not.to.include(API_KEY);
    expect(JSON.stringify(verifier.check("guess-0123456789abcdef"))).not.to.include("guess");
  });

  it("tells apart keys whose digests begin with the same four bytes", function () {
    // A birthday search: some 80,000 keys give two whose SHA-256 digests share their first 32 bits.
    const byPrefix = new Map<string, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; pair === undefined; i++) {
      const key = `colliding-key-${i}`;
      const prefix = createHash("sha256").update(key).digest("hex").slice(0, 8);
      const other = byPrefix.get(prefix);
      if (other !== undefined) pair = [other, key];
      else byPrefix.set(prefix, key);
    }
    const [first, second] = pair;
    const both = createApiKeyVerifier([first, second]);
    expect(both.check(first)).to.deep.include({ ok: true, keyIndex: 0 });
    expect(both.check(second)).to.deep.include({ ok: true, keyIndex: 1 });
    expect(createApiKeyVerifier([first]).check(second)).to.deep.equal({ ok: false, message: WRONG_KEY_MESSAGE });
  });

  it("refuses to be built without keys or with an empty key", function () {
    expect(() => createApiKeyVerifier([])).to.throw(TypeError);
    expect(() => createApiKeyVerifier([""])).to.throw(TypeError);
  });

  it("compares SHA-256 digests of a fixed length with crypto.timingSafeEqual, whatever the guess's length", function () {
    // node:crypto's CommonJS exports, watched: syncBuiltinESMExports hands the spy to the module's named import too.
    const crypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");
    const original = crypto.timingSafeEqual;
    const compared: Array<[number, number]> = [];
    crypto.timingSafeEqual = (a, b) => {
      compared.push([a.byteLength, b.byteLength]);
      return original(a, b);
    };
    syncBuiltinESMExports();
    try {
      for (const key of [API_KEY, "another-key-abcdefghijkl"]) {
        compared.length = 0;
        expect(verifier.check(key)).to.deep.include({ ok: true });
        expect(compared, key).to.deep.equal([[32, 32]]);
      }
      for (const wrong of ["x", `${API_KEY}x`, API_KEY.slice(1), "w".repeat(8_000)]) {
        compared.length = 0;
        expect(verifier.check(wrong)).to.deep.equal({ ok: false, message: WRONG_KEY_MESSAGE });
        expect(
          compared.every(([a, b]) => a === 32 && b === 32),
          wrong,
        ).to.equal(true);
      }
    } finally {
      crypto.timingSafeEqual = original;
      syncBuiltinESMExports();
    }
  });
});

describe("request path", function () {
  /** What URL parsing gives, or null where URL cannot parse the target. */
  const byUrl = (target: string) =>
    URL.canParse(target, "http://localhost") ? new URL(target, "http://localhost").pathname : null;

  it("is the path URL parsing gives, for plain paths and for every other target", function () {
    for (const target of [
      "/api/v1/token/price",
      "/api/v1/token/sell?amount=1&x=%2F",
      "/healthz",
      "/",
      "/api/v1/token/sell/",
      "/api/v1/token/../token/buy",
      "/api/v1/token/./buy",
      "/api/v1//token/buy",
      "//evil.example/api/v1/token/price",
      "/api/v1/token/%73ell",
      "http://localhost/api/v1/token/price",
      "*",
      "/tokentrade.v1.TokenService/Sell",
      "/grpc.health.v1.Health/Check?x=1",
      "/a.../b",
      "/.../x",
      "/a/.b/",
      "/a/b./",
      "/a/..",
      "/a/./",
      "/.",
      "/a/...",
    ]) {
      expect(requestPath(target), target).to.equal(byUrl(target));
    }
    expect(requestPath(undefined)).to.equal("/");
  });

  it("never throws: a target URL cannot parse is returned as it came (and matches no route)", function () {
    expect(byUrl("/\\")).to.equal(null);
    expect(requestPath("/\\")).to.equal("/\\");
    expect(requestPath("/\\?a=1")).to.equal("/\\");
  });

  it("agrees with URL parsing on arbitrary request targets (fast-check)", function () {
    const segment = fc.constantFrom(
      "api",
      "v1",
      "token",
      "price",
      "sell",
      "tokentrade.v1.TokenService",
      "a.b",
      "...",
      ".x",
      "x.",
      ".",
      "..",
      "",
      "%2e",
      "a b",
      "é",
      "x?y",
      "#",
      "\\",
    );
    const target = fc
      .tuple(fc.array(segment, { maxLength: 6 }), fc.option(fc.string({ maxLength: 10 })))
      .map(([segments, query]) => `/${segments.join("/")}${query === null ? "" : `?${query}`}`);
    fc.assert(
      fc.property(target, (t) => requestPath(t) === (byUrl(t) ?? t.split("?")[0])),
      { numRuns: 2000, seed: 20261122 },
    );
  });
});

describe("new request ids", function () {
  const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  it("are version 4 UUIDs, as crypto.randomUUID writes them, none repeated across many refills of their entropy", function () {
    const ids = Array.from({ length: 20_000 }, () => newRequestId());
    for (const id of ids) expect(id).to.match(V4);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it("draw every random hex digit evenly, so no byte is dropped, repeated or shifted in the writing", function () {
    // The 30 digits that are random (all but the version digit and the variant's top two bits).
    const positions = [...Array(36).keys()].filter((i) => ![8, 13, 14, 18, 19, 23].includes(i));
    const n = 32_000;
    const counts = positions.map(() => new Array<number>(16).fill(0));
    const variants = new Array<number>(4).fill(0);
    for (let k = 0; k < n; k++) {
      const id = newRequestId();
      for (const [i, p] of positions.entries()) counts[i]![Number.parseInt(id[p]!, 16)]!++;
      variants[Number.parseInt(id[19]!, 16) - 8]!++;
    }
    // Each digit is expected n/16 = 2,000 times (sd ≈ 43); 2,000 ± 300 is seven deviations.
    for (const digits of counts) for (const count of digits) expect(count).to.be.within(1_700, 2_300);
    for (const count of variants) expect(count).to.be.within(n / 4 - 600, n / 4 + 600);
  });

  it("take 16 bytes of their own each: no id repeats the tail of the one before at any shift", function () {
    const bytes = (id: string) => Buffer.from(id.replaceAll("-", ""), "hex");
    /** Whether b starts with a's bytes from `shift` on, the version and variant bytes (6, 8) left out. */
    const overlaps = (a: Buffer, b: Buffer, shift: number) => {
      for (let i = 0; i + shift < 16; i++)
        if (![6, 8].includes(i) && ![6, 8].includes(i + shift) && a[i + shift] !== b[i]) return false;
      return true;
    };
    let previous = bytes(newRequestId());
    for (let k = 0; k < 2_000; k++) {
      const next = bytes(newRequestId());
      // Up to 12: at least four bytes compared, so a chance match is one in 2^32.
      for (let shift = 1; shift <= 12; shift++)
        expect(overlaps(previous, next, shift), `shift ${shift}`).to.equal(false);
      previous = next;
    }
  });
});

describe("grpc-message encoding", function () {
  it("leaves printable ASCII alone and escapes %, control characters and non-ASCII", function () {
    expect(grpcPercentEncode("amount: is required (DAI, USDT)")).to.equal("amount: is required (DAI, USDT)");
    expect(grpcPercentEncode("100% sure\n")).to.equal("100%25 sure%0A");
    expect(grpcPercentEncode("prix: 1,25 €")).to.equal("prix: 1,25 %E2%82%AC");
  });
});

describe("proto mapping", function () {
  const order = {
    kind: "sell" as const,
    wallet: WALLET as `0x${string}`,
    destinatary: CUSTOMER as `0x${string}`,
    amount: 1n,
    stable: DAI,
  };

  it("maps every receipt field and keeps the events in key order, numerically", function () {
    const receipt = fakeReceipt(order, 12, 1);
    // Insert the keys out of order: "10" and "11" sort before "2" as text.
    const shuffled = { ...receipt, events: Object.fromEntries(Object.entries(receipt.events).reverse()) };
    const message = receiptMessage(shuffled);
    expect(message.blockHash).to.equal(receipt.blockHash);
    expect(message.blockNumber).to.equal(BigInt(receipt.blockNumber));
    expect(message.cumulativeGasUsed).to.equal(BigInt(receipt.cumulativeGasUsed));
    expect(message.effectiveGasPrice).to.equal(BigInt(receipt.effectiveGasPrice));
    expect(message.gasUsed).to.equal(BigInt(receipt.gasUsed));
    expect(message.from).to.equal(receipt.from);
    expect(message.to).to.equal(receipt.to);
    expect(message.logsBloom).to.equal(receipt.logsBloom);
    expect(message.status).to.equal(true);
    expect(message.transactionHash).to.equal(receipt.transactionHash);
    expect(message.transactionIndex).to.equal(receipt.transactionIndex);
    expect(message.type).to.equal("0x2");
    expect(message.contractAddress).to.equal(undefined);
    expect(message.events.map((e) => e.logIndex)).to.deep.equal([...Array(12).keys()]);
    const first = message.events[0]!;
    const log = receipt.events["0"]!;
    expect([first.address, first.blockHash, first.id, first.transactionHash]).to.deep.equal([
      log.address,
      log.blockHash,
      log.id,
      log.transactionHash,
    ]);
    expect(first.blockNumber).to.equal(BigInt(log.blockNumber));
    expect(first.removed).to.equal(false);
    expect(first.raw?.topics).to.deep.equal(log.raw.topics);
    expect(first.raw?.data).to.equal(log.raw.data);
  });

  it("maps the price record's rates into maps", function () {
    const message = priceMessage({
      cryptoCurrency: "TTK",
      rateForCashCurrency: { CHF: 1, EUR: 2, USD: 3 },
      rateWithDiscountForCashCurrency: { CHF: 0.9, EUR: 1.8, USD: 2.7 },
    });
    expect(message.cryptoCurrency).to.equal("TTK");
    expect(message.rateForCashCurrency).to.deep.equal({ CHF: 1, EUR: 2, USD: 3 });
    expect(message.rateWithDiscountForCashCurrency).to.deep.equal({ CHF: 0.9, EUR: 1.8, USD: 2.7 });
  });

  it("turns unset proto3 strings into absent fields so the core says which is required", function () {
    const input = tradeInputFromMessage(create(TradeRequestSchema, { userAddress: WALLET, amount: "1" }));
    expect(input).to.deep.equal({ userAddress: WALLET, destinatary: undefined, amount: "1", usdAddress: undefined });
  });
});

describe("TokenServiceImpl (a plain class over the use cases)", function () {
  it("translates a request into a use case call and the receipt into a message", async function () {
    const trade = new FakeTradePort();
    const service = new TokenServiceImpl(createUseCases({ trade, price: new FakePricePort(), config: CONFIG }));
    const receipt = await service.remittance(
      create(TradeRequestSchema, { userAddress: WALLET, destinatary: CUSTOMER, amount: "7", usdAddress: USDT.address }),
    );
    expect(receipt.events).to.have.length(3);
    expect(trade.calls[0]!.order.amount).to.equal(7_000_000n);
    expect(trade.calls[0]!.kind).to.equal("remittance");
  });

  it("lets domain errors through for the interceptor to map", async function () {
    const service = new TokenServiceImpl(
      createUseCases({ trade: new FakeTradePort(), price: new FakePricePort(), config: CONFIG }),
    );
    let thrown: unknown;
    try {
      await service.sell(create(TradeRequestSchema, {}));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).to.be.instanceOf(InvalidArgumentError);
  });
});

describe("the RPC routes behind the service's handler (its api_key step)", function () {
  let t: TestServer;
  afterEach(async function () {
    await t.close();
  });

  async function client() {
    t = await startTestServer();
    const transport = createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" });
    return { trade: t.trade, logs: t.logs, client: createClient(TokenService, transport) };
  }

  it("serves a sell with the right key", async function () {
    const { client: c, trade } = await client();
    const receipt = await c.sell(
      { userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: DAI.address },
      { headers: { api_key: API_KEY } },
    );
    expect(receipt.events).to.have.length(5);
    expect(trade.nonce).to.equal(1);
  });

  it("refuses a wrong key before the handler runs, and logs the refusal without the key", async function () {
    const { client: c, trade, logs } = await client();
    let code: Code | undefined;
    try {
      await c.buy(
        { userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: DAI.address },
        { headers: { api_key: "guessed-key-1234567890" } },
      );
    } catch (error) {
      code = ConnectError.from(error).code;
    }
    expect(code).to.equal(Code.Unauthenticated);
    expect(trade.calls).to.have.length(0);
    expect(logs.text).to.include("unauthenticated");
    expect(logs.text).not.to.include("guessed-key");
  });
});
