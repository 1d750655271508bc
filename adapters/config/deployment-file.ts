import { readFileSync } from "node:fs";

import { z } from "zod";

import { ConfigError } from "./env.js";

const address = (name: string) =>
  z
    .string({ error: `${name}: is required` })
    .regex(/^0x[0-9a-fA-F]{40}$/, `${name}: must be a 0x-prefixed 40-hex-digit address`);

/** The part of a deployment file the service needs (the file `npm start` writes to .dev/deployment.json has more). */
const schema = z.object({
  /** The chain the suite was deployed on (npm run deploy and npm start write it): checked against the node's at start. */
  chainId: z
    .number({ error: "chainId: must be a positive integer" })
    .int("chainId: must be a positive integer")
    .positive("chainId: must be a positive integer")
    .optional(),
  token: address("token"),
  swap: address("swap"),
  stableCoins: z.object(
    { DAI: address("stableCoins.DAI"), USDT: address("stableCoins.USDT"), USDC: address("stableCoins.USDC") },
    { error: "stableCoins: is required" },
  ),
  feeds: z.object(
    {
      tokenUsd: address("feeds.tokenUsd"),
      eurUsd: address("feeds.eurUsd"),
      chfUsd: address("feeds.chfUsd"),
      /** The native coin's USD feed: optional (older deployments have none; NATIVE_USD_FEED may name it). */
      nativeUsd: address("feeds.nativeUsd").optional(),
    },
    { error: "feeds: is required" },
  ),
});

export type DeploymentFileAddresses = z.infer<typeof schema>;

/**
 * Reads the suite's addresses from DEPLOYMENT_FILE, and the chain id when the file has one.
 * @throws ConfigError naming DEPLOYMENT_FILE and the missing or bad field
 */
export function readDeploymentFile(path: string): DeploymentFileAddresses {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    const reason =
      error instanceof SyntaxError
        ? "is not valid JSON"
        : `cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`;
    throw new ConfigError([`DEPLOYMENT_FILE: ${path} ${reason}`]);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `DEPLOYMENT_FILE: ${path}: ${issue.message}`));
  }
  return parsed.data;
}
