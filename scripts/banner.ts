/** The operator banner `npm start` prints (to stderr) once the service is ready. */
import type { RunningService } from "../adapters/main.js";

/** Hardhat account #2: a customer address for the examples. */
export const EXAMPLE_CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

export type BannerInput = Pick<
  RunningService,
  "apiUrl" | "addresses" | "wallets" | "generatedApiKey" | "mode" | "rpcUrl" | "chainId" | "deploymentFile"
> &
  Partial<Pick<RunningService, "metricsUrl">>;

/** Single-quotes a value for POSIX shells. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * What the service is, where, the key to use, and ready-to-paste commands: curl for
 * every route and grpcurl (or its stand-in scripts/grpc-call.ts) on the same port,
 * with the deployment's real addresses. The key is printed only when it was
 * generated for this run; configured keys are referred to as $API_KEY.
 */
export function banner(service: BannerInput): string {
  const { apiUrl, addresses } = service;
  const wallet = service.wallets[0]!;
  const tls = apiUrl.startsWith("https:");
  const hostPort = new URL(apiUrl).host;
  const trade = (amount: string, usdAddress: string) =>
    JSON.stringify({ userAddress: wallet, destinatary: EXAMPLE_CUSTOMER, amount, usdAddress });
  const grpcTrade = JSON.stringify({
    user_address: wallet,
    destinatary: EXAMPLE_CUSTOMER,
    amount: "10",
    usd_address: addresses.stableCoins.DAI,
  });
  const curl = `curl -sS${tls ? "k" : ""} -w '\\n'`;
  const curlGet = (path: string) => `${curl} ${apiUrl}${path} -H "api_key: $API_KEY"`;
  const curlPost = (path: string, body: string) =>
    `${curl} ${apiUrl}${path} -H "api_key: $API_KEY" \\\n  -H 'Content-Type: application/json' \\\n  -d ${shellQuote(body)}`;
  const grpcurl = (method: string, body?: string) =>
    `grpcurl ${tls ? "-insecure" : "-plaintext"} -import-path proto -proto tokentrade/v1/token.proto -H "api_key: $API_KEY" ${body ? `\\\n  -d ${shellQuote(body)} ` : ""}${hostPort} tokentrade.v1.TokenService/${method}`;
  const keyLine =
    service.generatedApiKey !== undefined
      ? `export API_KEY=${shellQuote(service.generatedApiKey)}   # generated for this run; set API_KEYS to choose your own`
      : "export API_KEY='<one of your API_KEYS>'";

  return [
    "",
    `Token trading service (${service.mode === "embedded" ? "embedded Hardhat chain" : "existing chain"}) is ready.`,
    `  API:        ${apiUrl}   (HTTP/1.1: JSON, Connect, gRPC-Web; ${tls ? "HTTP/2" : "h2c"}: gRPC, Connect)`,
    ...(service.metricsUrl
      ? [`  Metrics:    ${service.metricsUrl}   (Prometheus, no key; METRICS_PORT=0 turns it off)`]
      : []),
    `  Chain:      ${service.mode === "embedded" ? service.rpcUrl : "RPC_URL"}   chainId ${service.chainId}`,
    `  Wallet:     ${wallet}`,
    `  Token:      ${addresses.token}`,
    `  Swap:       ${addresses.swap}`,
    `  DAI:        ${addresses.stableCoins.DAI}`,
    `  USDT:       ${addresses.stableCoins.USDT}`,
    `  USDC:       ${addresses.stableCoins.USDC}`,
    ...(service.deploymentFile ? [`  Deployment: ${service.deploymentFile}`] : []),
    "",
    keyLine,
    "",
    "# price",
    curlGet("/api/v1/token/price"),
    "",
    "# sell 10 tokens for DAI",
    curlPost("/api/v1/token/sell", trade("10", addresses.stableCoins.DAI)),
    "",
    "# buy tokens for 25 USD paid in USDT",
    curlPost("/api/v1/token/buy", trade("25", addresses.stableCoins.USDT)),
    "",
    "# remittance of 25 USD paid in USDC",
    curlPost("/api/v1/remmitance", trade("25", addresses.stableCoins.USDC)),
    "",
    "# gRPC on the same port (without grpcurl: replace `grpcurl -plaintext -import-path proto -proto tokentrade/v1/token.proto`",
    "# with `npx tsx scripts/grpc-call.ts`)",
    grpcurl("GetPrice"),
    grpcurl("Sell", grpcTrade),
    "",
  ].join("\n");
}
