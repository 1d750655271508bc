/**
 * Property-based fuzzing of the JSON routes (fast-check) against the whole service on the
 * embedded chain (automine, so any transaction would mine a block):
 *
 *   no input ever yields a 5xx, every refusal is a `{code, message}` JSON body, and no input
 *   ever sends a transaction (the exchange wallet's pending nonce and the block number stay put).
 *
 * Every generated request is invalid in at least one way: whenever a case could be a valid
 * trade (valid key, POST to a trade route, JSON content type, and a body that passes a
 * conservative re-statement of the validation rules below), its api_key is replaced by a
 * wrong one. Replay a failure with FUZZ_SEED=<seed> (printed on failure); FUZZ_RUNS sets the
 * number of cases.
 */
import { connect } from "node:net";

import { expect } from "chai";
import fc from "fast-check";
import { getAddress } from "ethers";

import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { erc20, startEmbeddedService, type EmbeddedService } from "./chain-helpers.js";

const KEY = "fuzz-api-key-0123456789abcdef";
const WRONG_KEY = "fuzz-api-kez-0123456789abcdef";
const SEED = Number(process.env.FUZZ_SEED ?? 20_250_605);
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

const TRADE_PATHS = ["/api/v1/token/sell", "/api/v1/token/buy", "/api/v1/remmitance", "/api/v1/remittance"];
const CUSTOMER = hardhatAccount(2).address;
const STRANGER = hardhatAccount(3).address;
/** The embedded chain's token/USD price: 1.25 with 8 decimals. */
const PRICE = 125_000_000n;

interface FuzzCase {
  method: string;
  path: string;
  contentType: string | null;
  apiKey: string | null;
  idempotencyKey: string | null;
  body: string | Uint8Array | null;
}

/** Printable ASCII (what fetch accepts in a header value). */
const printable = (maxLength: number) =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength });

/** Flips the case of one letter of a checksummed address, which breaks its EIP-55 checksum. */
function breakChecksum(address: string): string {
  const i = [...address].findIndex((c, index) => index > 1 && /[a-fA-F]/.test(c));
  const c = address[i]!;
  return address.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + address.slice(i + 1);
}

/** A conservative re-statement of the trade validation: false only when the body is surely refused. */
function mightBeValidTrade(
  path: string,
  body: FuzzCase["body"],
  wallet: string,
  stables: Map<string, number>,
  balances: Map<string, bigint>,
): boolean {
  if (body === null) return false;
  let value: unknown;
  try {
    const text = typeof body === "string" ? body : new TextDecoder("utf-8", { fatal: true }).decode(body);
    value = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const fields = value as Record<string, unknown>;
  if (Object.keys(fields).sort().join() !== "amount,destinatary,usdAddress,userAddress") return false;
  const { userAddress, destinatary, amount, usdAddress } = fields;
  if (
    typeof userAddress !== "string" ||
    typeof destinatary !== "string" ||
    typeof amount !== "string" ||
    typeof usdAddress !== "string"
  ) {
    return false;
  }
  const address = (text: string) => {
    if (!/^0x[0-9a-fA-F]{40}$/.test(text)) return undefined;
    try {
      return getAddress(text); // throws on a mixed-case address with a wrong checksum
    } catch {
      return undefined;
    }
  };
  if (address(userAddress)?.toLowerCase() !== wallet.toLowerCase()) return false;
  if (address(destinatary) === undefined || /^0x0{40}$/.test(destinatary)) return false;
  const decimals = stables.get(address(usdAddress)?.toLowerCase() ?? "");
  if (decimals === undefined) return false;
  const match = /^(\d+)(?:\.(\d+))?$/.exec(amount);
  if (amount.length > 100 || !match || /^[0.]*$/.test(amount)) return false;
  const fraction = (match[2] ?? "").replace(/0+$/, "");
  const sell = path.endsWith("/sell");
  const places = sell ? 18 : decimals;
  if (fraction.length > places) return false;
  // More than the wallet holds, or too little to pay one base unit back (the swap reverts
  // with SwapZeroOutput): the chain refuses either, so the service must not send it.
  const units = BigInt(match[1]!) * 10n ** BigInt(places) + BigInt(fraction.padEnd(places, "0") || "0");
  const spent = sell ? "token" : address(usdAddress)!.toLowerCase();
  if (units > balances.get(spent)!) return false;
  const out = sell
    ? (units * PRICE * 10n ** BigInt(decimals)) / 10n ** 26n
    : (units * 10n ** 26n) / (PRICE * 10n ** BigInt(decimals));
  return out > 0n;
}

/** Whether the server could route the case to a trade: same method and path handling, leniently. */
function mightReachTrade(c: FuzzCase, base: string): boolean {
  if (c.method.toUpperCase() !== "POST") return false;
  let pathname: string;
  try {
    pathname = new URL(base + c.path).pathname;
  } catch {
    return false;
  }
  const forms = [pathname, pathname.toLowerCase()];
  try {
    forms.push(decodeURIComponent(pathname).toLowerCase());
  } catch {
    // not decodable: the first two forms stand
  }
  return forms.some((form) => TRADE_PATHS.includes(form.replace(/\/+/g, "/").replace(/\/$/, "")));
}

describe("fuzzing the JSON routes (fast-check): no 5xx, {code, message} refusals, no transaction", function () {
  let chain: EmbeddedService;

  before(async function () {
    // Limits above the wallet's funds, so that a too-large trade reaches the chain's preflight.
    chain = await startEmbeddedService(KEY, { MAX_SELL_TOKENS: "100000000", MAX_USD: "100000000" });
  });

  after(async function () {
    await chain?.close();
  });

  it(`${RUNS} random requests under /api/v1 (FUZZ_SEED=${SEED})`, async function () {
    this.timeout(120_000);
    const { provider, wallet, service } = chain;
    const coins = service.addresses.stableCoins;
    const stables = new Map([
      [coins.DAI.toLowerCase(), 18],
      [coins.USDT.toLowerCase(), 6],
      [coins.USDC.toLowerCase(), 6],
    ]);
    const base = service.apiUrl;
    const balances = new Map<string, bigint>([
      ["token", await erc20(service.addresses.token, provider).balanceOf(wallet)],
    ]);
    for (const coin of stables.keys()) balances.set(coin, await erc20(coin, provider).balanceOf(wallet));

    const address = fc.constantFrom(wallet, wallet.toLowerCase(), CUSTOMER, coins.DAI, coins.USDT, coins.USDC);
    const validBody = fc.record({
      userAddress: fc.constantFrom(wallet, wallet.toLowerCase()),
      destinatary: fc.constantFrom(CUSTOMER, CUSTOMER.toLowerCase(), STRANGER),
      amount: fc.constantFrom("1", "1.5", "0.25", "12.345678", "100"),
      usdAddress: fc.constantFrom(coins.DAI, coins.USDT, coins.USDC.toLowerCase()),
    });
    const badAddress = fc.oneof(
      address.map(breakChecksum),
      address.map((a) => a.slice(0, -1)),
      address.map((a) => `${a}0`),
      address.map((a) => a.slice(2)),
      address.map((a) => `0X${a.slice(2)}`),
      address.map((a) => ` ${a}`),
      fc.constantFrom(
        "0x",
        "",
        "0x0",
        `0x${"0".repeat(40)}`,
        `0x${"g".repeat(40)}`,
        "vitalik.eth",
        STRANGER,
        service.addresses.token,
        service.addresses.swap,
      ),
      fc.string({ unit: "grapheme", maxLength: 60 }),
    );
    const badAmount = fc.oneof(
      fc.constantFrom(
        "1e3",
        "-1",
        "0",
        "0.0",
        "000",
        " 1",
        "1 ",
        "+1",
        ".5",
        "1.",
        "0x10",
        "1,5",
        "1_000",
        "١",
        "Infinity",
        "NaN",
        "",
        "1.0000001",
      ),
      fc.constantFrom(
        "0.0000000000000000001",
        "1".repeat(101),
        "9".repeat(1000),
        `1.${"0".repeat(5000)}1`,
        "100000.000001",
        "5000000",
      ),
      fc.bigInt({ min: 0n, max: 10n ** 40n }).map(String),
      fc.tuple(fc.nat(10_000), fc.stringMatching(/^\d{0,25}$/)).map(([whole, fraction]) => `${whole}.${fraction}`),
      fc.string({ unit: "grapheme", maxLength: 30 }),
    );
    const anyValue = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.double().map((n) => n),
    );
    const refusedByChain = fc.constantFrom("5000000", "1000000.000001", "99999999", "0.000000000000000001", "0.000001");
    const nearValid = fc
      .tuple(validBody, fc.nat(10), badAddress, badAmount, anyValue, fc.string({ maxLength: 12 }), refusedByChain)
      .map(([body, which, addr, amount, value, key, tooMuch]): Record<string, unknown> => {
        switch (which) {
          case 0:
            return { ...body, userAddress: addr };
          case 1:
            return { ...body, destinatary: addr };
          case 2:
            return { ...body, usdAddress: addr };
          case 3:
          case 4:
            return { ...body, amount };
          case 5:
            return {
              ...body,
              [["userAddress", "destinatary", "amount", "usdAddress"][value === null ? 0 : String(value).length % 4]!]:
                value,
            };
          case 6: {
            const { amount: _dropped, ...rest } = body;
            return rest;
          }
          case 7:
            return { ...body, [key === "" ? "note" : key]: value };
          case 8:
            return { ...body, userAddress: STRANGER }; // a well-formed wallet the service holds no key for
          case 9:
            return { ...body, amount: tooMuch };
          default:
            return { ...body, amount: Number(body.amount) };
        }
      });
    const fourFields = fc.record(
      { userAddress: anyValue, destinatary: anyValue, amount: anyValue, usdAddress: anyValue },
      { requiredKeys: [] },
    );
    const hugeString = fc
      .integer({ min: 10_000, max: 40_000 })
      .chain((n) => fc.constantFrom("9".repeat(n), "é".repeat(n), `{"amount":"${"1".repeat(n)}"}`));
    const body: fc.Arbitrary<FuzzCase["body"]> = fc.oneof(
      { weight: 3, arbitrary: validBody.map((b) => JSON.stringify(b)) },
      { weight: 6, arbitrary: nearValid.map((b) => JSON.stringify(b)) },
      { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
      { weight: 2, arbitrary: fourFields.map((v) => JSON.stringify(v)) },
      { weight: 1, arbitrary: hugeString },
      { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(null, "", " ", "null", "[]", "{}", "{", '{"userAddress":', "\u0000", "\ufeff{}"),
      },
    );
    const method = fc.oneof(
      { weight: 12, arbitrary: fc.constant("POST") },
      // (Methods Node's HTTP parser does not know, such as FOO, are the separate test below.)
      { weight: 3, arbitrary: fc.constantFrom("GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "post", "PURGE") },
    );
    const path = fc.oneof(
      { weight: 14, arbitrary: fc.constantFrom(...TRADE_PATHS, "/api/v1/token/price") },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "/api/v1/token/sell/",
          "/API/V1/TOKEN/SELL",
          "/api/v1/token/sell?amount=1",
          "/api/v1/token/%73ell",
          "/api/v1//token/buy",
          "/api/v1/token/./buy",
          "/api/v1/token/../token/buy",
          "/api/v1/remitance",
          "/api/v1",
          "/api/v1/",
          "/api/v1/token",
          "/api/v2/token/sell",
        ),
      },
      {
        weight: 1,
        arbitrary: fc.array(fc.webSegment(), { maxLength: 4 }).map((segments) => `/api/v1/${segments.join("/")}`),
      },
      {
        weight: 1,
        arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }).map((s) => `/api/v1/${encodeURIComponent(s)}`),
      },
    );
    const contentType = fc.oneof(
      { weight: 10, arbitrary: fc.constant("application/json") },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          null,
          "application/json; charset=utf-8",
          "APPLICATION/JSON",
          "application/json; charset=latin1",
          "application/jsonx",
          "text/plain",
          "text/json",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "application/grpc",
          "application/connect+json",
          "",
        ),
      },
      { weight: 1, arbitrary: printable(40) },
    );
    const apiKey = fc.oneof(
      { weight: 10, arbitrary: fc.constant(KEY) },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          null,
          "",
          WRONG_KEY,
          KEY.toUpperCase(),
          `${KEY}x`,
          KEY.slice(1),
          `${KEY},${KEY}`,
          `Bearer ${KEY}`,
        ),
      },
      { weight: 1, arbitrary: printable(64) },
    );
    const idempotencyKey = fc.option(printable(80), { freq: 3 });

    // A valid trade request with exactly one thing changed: the key, the method, the path,
    // the Content-Type, or one field of the body.
    const oneMutation = fc
      .record({
        change: fc.constantFrom("body", "body", "body", "body", "key", "method", "path", "contentType"),
        valid: validBody,
        tradePath: fc.constantFrom(...TRADE_PATHS),
        body: nearValid,
        method,
        path,
        contentType,
        apiKey,
        idempotencyKey,
      })
      .map(
        (r): FuzzCase => ({
          method: r.change === "method" ? r.method : "POST",
          path: r.change === "path" ? r.path : r.tradePath,
          contentType: r.change === "contentType" ? r.contentType : "application/json",
          apiKey: r.change === "key" ? r.apiKey : KEY,
          idempotencyKey: r.idempotencyKey,
          body: JSON.stringify(r.change === "body" ? r.body : r.valid),
        }),
      );
    const anything = fc.record({ method, path, contentType, apiKey, idempotencyKey, body });

    const cases = fc.oneof(anything, oneMutation).map((c): FuzzCase => {
      // Never a valid key together with a request that could be a valid trade.
      const couldTrade =
        c.apiKey?.includes(KEY) &&
        (c.contentType === null || /json/i.test(c.contentType)) &&
        mightReachTrade(c, base) &&
        TRADE_PATHS.some((p) => mightBeValidTrade(p, c.body, wallet, stables, balances));
      return couldTrade ? { ...c, apiKey: WRONG_KEY } : c;
    });

    const nonceBefore = await provider.getTransactionCount(wallet, "pending");
    const blockBefore = await provider.getBlockNumber();
    const statuses = new Map<number, number>();
    const codes = new Map<string, number>();
    const started = performance.now();

    const property = fc.asyncProperty(cases, async (c) => {
      const headers: Record<string, string> = {};
      if (c.contentType !== null) headers["content-type"] = c.contentType;
      if (c.apiKey !== null) headers.api_key = c.apiKey;
      if (c.idempotencyKey !== null) headers["idempotency-key"] = c.idempotencyKey;
      const bodyless = ["GET", "HEAD"].includes(c.method.toUpperCase());
      const nonce = await provider.getTransactionCount(wallet, "pending");
      const response = await fetch(base + c.path, {
        method: c.method,
        headers,
        ...(bodyless || c.body === null ? {} : { body: c.body }),
      });
      const text = await response.text();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      const code = /"code":"([a-z_]+)"/.exec(text)?.[1];
      if (code !== undefined) codes.set(code, (codes.get(code) ?? 0) + 1);
      const where = `${c.method} ${c.path} -> ${response.status} ${text.slice(0, 300)}`;
      expect(response.status, where).to.be.below(500);
      if ((response.status < 200 || response.status > 299) && c.method.toUpperCase() !== "HEAD") {
        let parsed: unknown;
        expect(() => (parsed = JSON.parse(text)), where).not.to.throw();
        expect(parsed, where).to.be.an("object");
        const { code, message } = parsed as { code: unknown; message: unknown };
        expect(code, where)
          .to.be.a("string")
          .and.match(/^[a-z_]+$/);
        expect(message, where).to.be.a("string").and.not.equal("");
      }
      expect(await provider.getTransactionCount(wallet, "pending"), `${where}: the wallet sent a transaction`).to.equal(
        nonce,
      );
    });

    try {
      await fc.assert(property, {
        seed: SEED,
        numRuns: RUNS,
        interruptAfterTimeLimit: 90_000,
        markInterruptAsFailure: true,
      });
    } catch (error) {
      (error as Error).message = `FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}: ${(error as Error).message}`;
      throw error;
    }
    const elapsedMs = performance.now() - started;

    expect(await provider.getTransactionCount(wallet, "pending")).to.equal(nonceBefore);
    expect(await provider.getTransactionCount(wallet, "latest")).to.equal(nonceBefore);
    expect(await provider.getBlockNumber(), "no block was mined, so no transaction from anyone").to.equal(blockBefore);
    const summary = [...statuses]
      .sort(([a], [b]) => a - b)
      .map(([status, n]) => `${status}×${n}`)
      .join(" ");
    const codeSummary = [...codes]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([code, n]) => `${code}×${n}`)
      .join(" ");
    console.log(`      ${RUNS} cases in ${Math.round(elapsedMs)} ms: ${summary}; ${codeSummary}`);
    // The generator is not degenerate: it reaches every refusal of the JSON routes.
    expect([...statuses.keys()]).to.include.members([400, 401, 404, 405, 413, 415]);
    expect([...codes.keys()]).to.include.members([
      "invalid_argument",
      "unauthenticated",
      "permission_denied",
      "failed_precondition",
      "not_found",
      "unimplemented",
    ]);
  });

  it(`${RUNS} random query strings of the trade history (FUZZ_SEED=${SEED}): 200 or a 400 naming a field`, async function () {
    this.timeout(120_000);
    const base = chain.service.apiUrl;
    const names = fc.oneof(
      fc.constantFrom("status", "kind", "since", "until", "limit", "cursor"),
      fc.constantFrom("", "Status", "__proto__", "constructor", "limit[]", "page", "offset"),
      printable(12),
    );
    const values = fc.oneof(
      fc.constantFrom(
        "confirmed",
        "failed",
        "sell",
        "buy",
        "remittance",
        "CONFIRMED",
        "2026-11-25",
        "2026-11-25T10:00:00Z",
      ),
      fc.constantFrom(
        "2026-02-30",
        "2026-11-25T10:00:00",
        "2026-11-25T10:00:00.123456789+01:00",
        "+002026-11-25",
        "9999-12-31T23:59:59Z",
      ),
      fc.constantFrom("0", "1", "500", "501", "-1", "1e2", "0x10", "50.0", " 5", "99999999999999999999", "NaN"),
      fc.constantFrom(
        "djEuMTc2NDExODc4MTEyMzQ1Ni5hYmM",
        "dj",
        "v1.1.x",
        "%",
        "%zz",
        "%00",
        "%E2%80%AE",
        "a+b",
        "\u00e9",
      ),
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.base64String({ maxLength: 60 }),
    );
    const query = fc
      .array(fc.tuple(names, values), { maxLength: 5 })
      .map((pairs) =>
        pairs.map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`).join("&"),
      );
    const raw = fc.constantFrom("a=%", "status", "=", "&&&", "limit=1&limit=2", "cursor=%ZZ", "since=%C0%AF");
    const statuses = new Map<number, number>();
    const property = fc.asyncProperty(
      fc.constantFrom("/api/v1/trades", "/api/v1/trades/summary"),
      fc.oneof(query, raw),
      fc.boolean(),
      async (path, q, csv) => {
        const response = await fetch(`${base}${path}?${q}`, {
          headers: { api_key: KEY, ...(csv ? { accept: "text/csv" } : {}) },
        });
        const text = await response.text();
        const where = `GET ${path}?${q} -> ${response.status} ${text.slice(0, 300)}`;
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        expect(response.status, where).to.be.oneOf([200, 400]);
        if (response.status === 400) {
          const { code, message } = JSON.parse(text) as { code: string; message: string };
          expect(code, where).to.equal("invalid_argument");
          expect(message, where).to.match(/^[^:]*: ./s);
        } else if (!(csv && path === "/api/v1/trades")) {
          expect(() => JSON.parse(text), where).not.to.throw();
        }
      },
    );
    try {
      await fc.assert(property, {
        seed: SEED,
        numRuns: RUNS,
        interruptAfterTimeLimit: 90_000,
        markInterruptAsFailure: true,
      });
    } catch (error) {
      (error as Error).message = `FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}: ${(error as Error).message}`;
      throw error;
    }
    expect([...statuses.keys()].sort()).to.deep.equal([200, 400]);
  });

  it(`${RUNS} random quote bodies, and random Quote-Ids on valid trades (FUZZ_SEED=${SEED}): 200 or a 4xx, nothing sent`, async function () {
    this.timeout(120_000);
    const { provider, wallet, service } = chain;
    const base = service.apiUrl;
    const coins = service.addresses.stableCoins;
    const field = <T>(value: fc.Arbitrary<T>) =>
      fc.oneof(value, fc.constant(undefined), fc.constant(null), fc.jsonValue({ maxDepth: 2 }));
    const quoteBody = fc.record(
      {
        kind: field(fc.constantFrom("sell", "buy", "remittance", "Sell", "", "swap")),
        userAddress: field(fc.constantFrom(wallet, wallet.toLowerCase(), breakChecksum(wallet), STRANGER, "0x")),
        destinatary: field(fc.constantFrom(CUSTOMER, wallet, coins.DAI, "0x0000000000000000000000000000000000000000")),
        amount: field(fc.constantFrom("1", "0.5", "0", "-1", "1e3", "1000000000000", "99999999", "0.0000001", " 1")),
        usdAddress: field(fc.constantFrom(coins.DAI, coins.USDT, coins.USDC, STRANGER)),
        slippageBps: field(fc.oneof(fc.integer({ min: -5, max: 1_005 }), fc.double(), fc.constantFrom("50", 1e308))),
        extra: fc.jsonValue({ maxDepth: 1 }),
      },
      { requiredKeys: [] },
    );
    const validQuote = fc.record(
      {
        kind: fc.constantFrom("sell", "buy", "remittance"),
        amount: fc.constantFrom("1", "0.5", "99999999", "1000000000000"),
        usdAddress: fc.constantFrom(coins.DAI, coins.USDT, coins.USDC),
        destinatary: fc.constantFrom(CUSTOMER, CUSTOMER.toLowerCase()),
        slippageBps: fc.integer({ min: 0, max: 1_000 }),
      },
      { requiredKeys: ["kind", "amount", "usdAddress"] },
    );
    const quoteCase = fc.oneof(
      { weight: 4, arbitrary: validQuote.map((b) => JSON.stringify(b)) },
      { weight: 8, arbitrary: quoteBody.map((b) => JSON.stringify(b)) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
    );
    const quoteId = fc.oneof(
      printable(60),
      fc.uint8Array({ minLength: 16, maxLength: 16 }).map((bytes) => `q_${Buffer.from(bytes).toString("hex")}`),
      fc.constantFrom("q_", "", " ", "q_00000000000000000000000000000000"),
    );
    const tradeCase = fc.record({
      path: fc.constantFrom(...TRADE_PATHS),
      quoteId,
      amount: fc.constantFrom("1", "2.5"),
      usdAddress: fc.constantFrom(coins.DAI, coins.USDT, coins.USDC),
    });
    const nonceBefore = await provider.getTransactionCount(wallet, "pending");
    const statuses = new Map<number, number>();
    const property = fc.asyncProperty(fc.oneof(quoteCase, tradeCase), async (c) => {
      const trade = typeof c !== "string";
      const response = await fetch(`${base}${trade ? c.path : "/api/v1/token/quote"}`, {
        method: "POST",
        headers: {
          api_key: KEY,
          "content-type": "application/json",
          // Never without the header (an empty value is sent as one that cannot be a quote id).
          ...(trade ? { "quote-id": c.quoteId.trim() || "x" } : {}),
        },
        body: trade
          ? JSON.stringify({ userAddress: wallet, destinatary: CUSTOMER, amount: c.amount, usdAddress: c.usdAddress })
          : c,
      });
      const text = await response.text();
      const where = `${trade ? `${c.path} Quote-Id ${JSON.stringify(c.quoteId)}` : `quote ${c}`} -> ${response.status} ${text.slice(0, 300)}`;
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      expect(response.status, where).to.be.oneOf(trade ? [400, 404] : [200, 400, 403]);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      if (response.status === 200) expect(parsed.quoteId, where).to.match(/^q_[0-9a-f]{32}$/);
      else expect(Object.keys(parsed), where).to.have.members(["code", "message"]);
    });
    try {
      await fc.assert(property, {
        seed: SEED,
        numRuns: RUNS,
        interruptAfterTimeLimit: 90_000,
        markInterruptAsFailure: true,
      });
    } catch (error) {
      (error as Error).message = `FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}: ${(error as Error).message}`;
      throw error;
    }
    expect(await provider.getTransactionCount(wallet, "pending")).to.equal(nonceBefore);
    expect([...statuses.keys()]).to.include.members([200, 400, 404]);
  });

  it("requests Node's HTTP parser refuses (an unknown method, a malformed header) also get a {code, message} body", async function () {
    const { provider, wallet, service } = chain;
    const nonceBefore = await provider.getTransactionCount(wallet, "pending");
    const url = new URL(service.apiUrl);
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(url.port), url.hostname, () => socket.end(request));
        let answer = "";
        socket.setEncoding("utf8");
        socket.on("data", (chunk: string) => (answer += chunk));
        socket.on("end", () => resolve(answer));
        socket.on("error", reject);
      });
    const answers = [
      await raw(`FOO /api/v1/token/sell HTTP/1.1\r\nHost: x\r\napi_key: ${KEY}\r\nContent-Length: 2\r\n\r\n{}`),
      await raw(`POST /api/v1/token/sell HTTP/1.1\r\nHost: x\r\nbroken header line\r\n\r\n`),
    ];
    for (const answer of answers) {
      const [head = "", body = ""] = answer.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      expect(status, head).to.be.within(400, 499);
      expect(() => JSON.parse(body), `${head.split("\r\n")[0]} with body ${JSON.stringify(body)}`).not.to.throw();
      expect(JSON.parse(body)).to.have.keys("code", "message");
    }
    expect(await provider.getTransactionCount(wallet, "pending")).to.equal(nonceBefore);
  });
});
