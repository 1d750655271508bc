/**
 * A small stand-in for grpcurl (which Debian does not package), on @grpc/grpc-js:
 * calls one TokenService method over plaintext h2c, or TLS with --tls, and prints
 * the response as JSON. Arguments follow grpcurl's:
 *
 *   npx tsx scripts/grpc-call.ts -H "api_key: $API_KEY" -d '{"user_address": ...}' \
 *     127.0.0.1:8080 tokentrade.v1.TokenService/Sell
 *
 * Exit code 0 on success; on a gRPC error, prints its code and message and exits 1.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const usage = `usage: grpc-call.ts [-H 'name: value']... [-d '<json>'] [--tls [--cacert file]] host:port tokentrade.v1.TokenService/<Method>`;

const args = process.argv.slice(2);
const headers: Array<[string, string]> = [];
let data = "{}";
let tls = false;
let caCert: Buffer | undefined;
const positional: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i]!;
  if (arg === "-H") {
    const header = args[++i] ?? "";
    const colon = header.indexOf(":");
    if (colon <= 0) throw new Error(`-H needs "name: value", got ${JSON.stringify(header)}`);
    headers.push([header.slice(0, colon).trim().toLowerCase(), header.slice(colon + 1).trim()]);
  } else if (arg === "-d") {
    data = args[++i] ?? "{}";
  } else if (arg === "--tls") {
    tls = true;
  } else if (arg === "--cacert") {
    caCert = readFileSync(args[++i] ?? "");
  } else if (arg === "-h" || arg === "--help") {
    console.log(usage);
    process.exit(0);
  } else {
    positional.push(arg);
  }
}
const [address, fullMethod] = positional;
const match = /^tokentrade\.v1\.TokenService\/(Sell|Buy|Remittance|GetPrice|GetTrade|ListTrades|GetTradeSummary)$/.exec(
  fullMethod ?? "",
);
if (address === undefined || match === null) {
  console.error(usage);
  process.exit(2);
}

const definition = protoLoader.loadSync("tokentrade/v1/token.proto", {
  includeDirs: [fileURLToPath(new URL("../proto", import.meta.url))],
  keepCase: true,
  longs: String,
  defaults: true,
});
const pkg = grpc.loadPackageDefinition(definition) as unknown as {
  tokentrade: { v1: { TokenService: grpc.ServiceClientConstructor } };
};
const client = new pkg.tokentrade.v1.TokenService(
  address,
  tls ? grpc.credentials.createSsl(caCert) : grpc.credentials.createInsecure(),
);
const metadata = new grpc.Metadata();
for (const [name, value] of headers) metadata.add(name, value);

const method = match[1]!;
client[method]!(JSON.parse(data), metadata, (error: grpc.ServiceError | null, response: unknown) => {
  client.close();
  if (error) {
    console.error(`ERROR:\n  Code: ${grpc.status[error.code]}\n  Message: ${error.details}`);
    process.exitCode = 1;
    return;
  }
  console.log(JSON.stringify(response, null, 2));
});
