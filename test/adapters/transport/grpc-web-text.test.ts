/**
 * gRPC-Web's text mode (application/grpc-web-text, base64 both ways), with Google's own
 * grpc-web client (npm `grpc-web`, as a browser app uses it, over xhr2's XMLHttpRequest in
 * Node) in its default text mode, against the real handler on fake ports.
 */
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { expect } from "chai";
import * as grpcWeb from "grpc-web";
// @ts-expect-error xhr2 has no type declarations; it is XMLHttpRequest, for grpc-web in Node.
import XMLHttpRequest from "xhr2";

import {
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus,
} from "../../../gen/grpc/health/v1/health_pb.js";
import {
  GetPriceRequestSchema,
  PriceRecordSchema,
  TokenService,
  TradeRequestSchema,
  TransactionReceiptSchema,
} from "../../../gen/tokentrade/v1/token_pb.js";
import { API_KEY, CUSTOMER, DAI, PRICE, WALLET, startTestServer, type TestServer } from "./helpers.js";

// grpc-web calls XMLHttpRequest as a browser global.
(globalThis as { XMLHttpRequest?: unknown }).XMLHttpRequest = XMLHttpRequest;

/** A grpc-web method descriptor over protobuf-es schemas. */
function method<I extends DescMessage, O extends DescMessage>(
  path: string,
  kind: "unary" | "server_streaming",
  input: I,
  output: O,
) {
  class Request {}
  class Response {}
  return new grpcWeb.MethodDescriptor<MessageShape<I>, MessageShape<O>>(
    path,
    kind,
    Request as never,
    Response as never,
    (request: MessageShape<I>) => toBinary(input, request),
    (bytes: Uint8Array) => fromBinary(output, bytes),
  );
}

/** Base64 text that may be several padded pieces (one per chunk the server wrote), as bytes. */
function decodeText(text: string): Buffer {
  expect(text).to.match(/^(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)*$/);
  const groups = text.match(/.{4}/g) ?? [];
  return Buffer.concat(groups.map((group) => Buffer.from(group, "base64")));
}

const GET_PRICE = method(`/${TokenService.typeName}/GetPrice`, "unary", GetPriceRequestSchema, PriceRecordSchema);
const SELL = method(`/${TokenService.typeName}/Sell`, "unary", TradeRequestSchema, TransactionReceiptSchema);
const WATCH = method(
  "/grpc.health.v1.Health/Watch",
  "server_streaming",
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
);

describe("gRPC-Web text mode (Google's grpc-web client)", function () {
  let t: TestServer;
  beforeEach(async function () {
    t = await startTestServer();
  });
  afterEach(async function () {
    await t.close();
  });

  for (const format of ["text", "binary"]) {
    it(`calls GetPrice and Sell in ${format} mode`, async function () {
      const client = new grpcWeb.GrpcWebClientBase({ format });
      const price = await client.unaryCall(
        `${t.url}${GET_PRICE.getName()}`,
        create(GetPriceRequestSchema),
        { api_key: API_KEY },
        GET_PRICE,
      );
      expect(price.rateForCashCurrency).to.deep.equal(PRICE.rateForCashCurrency);
      const receipt = await client.unaryCall(
        `${t.url}${SELL.getName()}`,
        create(TradeRequestSchema, {
          userAddress: WALLET,
          destinatary: CUSTOMER,
          amount: "10",
          usdAddress: DAI.address,
        }),
        { api_key: API_KEY },
        SELL,
      );
      expect(receipt.status).to.equal(true);
      expect(Object.keys(receipt.events)).to.have.length(5);
    });
  }

  it("answers a text call without a key with UNAUTHENTICATED, and a field error with INVALID_ARGUMENT naming the field", async function () {
    const client = new grpcWeb.GrpcWebClientBase({ format: "text" });
    const refused = await client
      .unaryCall(`${t.url}${GET_PRICE.getName()}`, create(GetPriceRequestSchema), {}, GET_PRICE)
      .catch((e: grpcWeb.RpcError) => e);
    expect((refused as grpcWeb.RpcError).code).to.equal(grpcWeb.StatusCode.UNAUTHENTICATED);
    const invalid = await client
      .unaryCall(
        `${t.url}${SELL.getName()}`,
        create(TradeRequestSchema, {
          userAddress: WALLET,
          destinatary: CUSTOMER,
          amount: "-1",
          usdAddress: DAI.address,
        }),
        { api_key: API_KEY },
        SELL,
      )
      .catch((e: grpcWeb.RpcError) => e);
    expect((invalid as grpcWeb.RpcError).code).to.equal(grpcWeb.StatusCode.INVALID_ARGUMENT);
    expect((invalid as grpcWeb.RpcError).message).to.include("amount");
    expect(t.trade.calls).to.have.length(0);
  });

  it("streams in text mode: a health Watch's first message arrives while the stream stays open", async function () {
    // xhr2 hands grpc-web a streamed body only once it ends, so the stream is read with fetch.
    const controller = new AbortController();
    const answer = await fetch(`${t.url}${WATCH.getName()}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web-text", accept: "application/grpc-web-text" },
      body: Buffer.from([0, 0, 0, 0, 0]).toString("base64"), // {service: ""}
      signal: controller.signal,
    });
    expect(answer.headers.get("content-type")).to.equal("application/grpc-web-text+proto");
    const reader = answer.body!.getReader();
    let text = "";
    while (decodeText(text).length < 5 || decodeText(text).length < 5 + decodeText(text).readUInt32BE(1)) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended before its first message");
      text += Buffer.from(value).toString("latin1");
    }
    const bytes = decodeText(text);
    expect(bytes[0]).to.equal(0);
    const message = fromBinary(HealthCheckResponseSchema, bytes.subarray(5, 5 + bytes.readUInt32BE(1)));
    expect(message.status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
    controller.abort();
  });

  it("answers text with text: base64 of gRPC-Web frames, typed application/grpc-web-text+proto; a body that is not base64 is INVALID_ARGUMENT", async function () {
    const frame = Buffer.from([0, 0, 0, 0, 0]); // an empty GetPriceRequest
    const answer = await fetch(`${t.url}${GET_PRICE.getName()}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web-text", accept: "application/grpc-web-text", api_key: API_KEY },
      body: frame.toString("base64"),
    });
    expect(answer.headers.get("content-type")).to.equal("application/grpc-web-text+proto");
    const text = await answer.text();
    const bytes = decodeText(text);
    expect(bytes[0]).to.equal(0); // a message frame, then the trailers frame (0x80)
    const length = bytes.readUInt32BE(1);
    expect(bytes[5 + length]).to.equal(0x80);
    expect(bytes.subarray(10 + length).toString()).to.match(/grpc-status: ?0/);

    const garbage = await fetch(`${t.url}${GET_PRICE.getName()}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web-text", api_key: API_KEY },
      body: "!!!!",
    });
    const garbageText = decodeText(await garbage.text()).toString("latin1");
    expect(garbage.headers.get("grpc-status") ?? /grpc-status: ?(\d+)/.exec(garbageText)?.[1]).to.equal("3");
  });
});
