/**
 * A connect-node client in a process of its own, for early-answer.test.ts: as a client on another
 * machine, its event loop is not the server's, so whether it reads an early answer or fails writing
 * its body is up to the connection alone. Calls TokenService.Sell over TLS HTTP/1.1, `calls` at once
 * on connections of their own, with `api_key` and an amount of `amountLength` digits, and prints
 * how many calls ended with each code as one JSON line, such as {"Unauthenticated: invalid api_key": 20}.
 *
 * Usage: node --import tsx connect-h1-client.ts <baseUrl> <ca file> <api_key> <calls> <amountLength>
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";

async function main(baseUrl: string, caFile: string, apiKey: string, calls: number, amountLength: number) {
  const ca = readFileSync(caFile);
  const outcomes: Record<string, number> = {};
  await Promise.all(
    Array.from({ length: calls }, async () => {
      // agent: false, a connection per call: each refusal comes as its client starts writing the body.
      const client = createClient(
        TokenService,
        createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { ca, agent: false } }),
      );
      let outcome: string;
      try {
        await client.sell(
          {
            userAddress: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            destinatary: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            amount: "1".repeat(amountLength),
            usdAddress: "0xdAC17F958D2ee523a2206206994597C13D831ec7",
          },
          { headers: { api_key: apiKey } },
        );
        outcome = "ok";
      } catch (error) {
        const connectError = ConnectError.from(error);
        outcome = `${Code[connectError.code]}: ${connectError.rawMessage}`;
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }),
  );
  process.stdout.write(`${JSON.stringify(outcomes)}\n`);
}

// Run only as a program: `hardhat test` loads every file under test/, this one included.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [baseUrl, caFile, apiKey, calls, amountLength] = process.argv.slice(2);
  await main(baseUrl!, caFile!, apiKey!, Number(calls), Number(amountLength));
}
