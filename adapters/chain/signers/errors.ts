/**
 * The two ways a signer outside this process fails: at start (a wrong PIN, a missing token or
 * key, a key that is not the wallet's), which stops the start with a message that names the
 * variable to fix; and while trading (the token or the KMS does not answer), which fails the
 * trade as `unavailable` with nothing sent. Neither message ever carries the PIN.
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

/** The wallet's key cannot sign now: the trade answers unavailable, and nothing was sent. */
export function signerUnavailable(address: string, what: string, reason: string): ChainUnavailableError {
  return new ChainUnavailableError(`the signer of ${address} (${what}) cannot sign (${reason}); nothing was sent`);
}
