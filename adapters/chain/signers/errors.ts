/**
 * The two ways a signer outside this process fails: at start (a wrong PIN, a missing token or
 * key, a key that is not the wallet's), which stops the start with a message that names the
 * variable to fix; and while trading (the token or the KMS does not answer), which fails the
 * trade as `unavailable` with nothing sent. The client is told only which wallet's signer cannot
 * sign: the KMS key's ARN (with its account), the token's label and the settings involved go to
 * the server's log. Neither ever carries the PIN.
 */
import { ChainUnavailableError } from "../../../core/index.js";

/** A signer that cannot be used as configured: `variable` is the setting to fix; the message starts with it. */
export class SignerStartError extends Error {
  override name = "SignerStartError";
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
  }
}

/** The part of a logger the signers use (pino's fits). */
export interface SignerLog {
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * The wallet's key cannot sign now: the trade answers unavailable, and nothing was sent. `what`
 * (the token, the KMS key) and `reason` are logged, not answered.
 */
export function signerUnavailable(
  address: string,
  what: string,
  reason: string,
  log: SignerLog | undefined,
): ChainUnavailableError {
  log?.warn(
    { wallet: address, signer: what, reason },
    "the wallet's signer cannot sign; the trade is refused, nothing was sent",
  );
  return new ChainUnavailableError(`the signer of ${address} cannot sign; nothing was sent`);
}
