/**
 * The PIN the PKCS#11 signer logs in with (pkcs11-process.ts), and the one the token refused.
 * HSMs lock the user after a few wrong PINs (Luna, CloudHSM, YubiHSM), which stops every
 * application on that partition: once the token refuses the PIN after the start (rotated on the
 * HSM, the service not told yet), it is never offered again. Every signature answers unavailable
 * without a login, and one error is logged naming PKCS11_PIN_FILE, until that file holds another
 * PIN (it is read again at each signature while the PIN is refused) or the service restarts.
 * The PIN itself is never logged.
 */
import { readFile } from "node:fs/promises";

import type { SignerLog } from "./errors.js";
import type { Failure } from "./pkcs11-protocol.js";

export class Pin {
  #value: string;
  readonly #file: string | undefined;
  readonly #log: SignerLog | undefined;
  #refused: { pin: string; failure: Failure } | undefined;

  constructor(value: string, file: string | undefined, log: SignerLog | undefined) {
    this.#value = value;
    this.#file = file;
    this.#log = log;
  }

  /** The PIN to log in with. */
  get value(): string {
    return this.#value;
  }

  /** The token refused the PIN (`failure`): not offered again, and said once in the log. */
  refuse(failure: Failure, token: string): void {
    if (this.#refused?.pin === this.#value) return;
    this.#refused = { pin: this.#value, failure };
    this.#log?.error(
      { variable: "PKCS11_PIN_FILE", token, reason: failure.detail },
      "the PKCS#11 token refused the PIN: no signature, and no other login (the token would lock the user out), " +
        "until PKCS11_PIN_FILE holds the token's PIN or the service restarts",
    );
  }

  /**
   * Nothing, while the token has not refused the PIN, or once PKCS11_PIN_FILE holds another one (logged in with next).
   * @returns the refusal, while the file still holds the refused PIN
   */
  async refusal(): Promise<Failure | undefined> {
    const refused = this.#refused;
    if (refused === undefined) return undefined;
    if (this.#file === undefined) return refused.failure;
    let now: string;
    try {
      // The file's last line break is not part of the PIN, as at start (adapters/config/env/signer.ts).
      now = (await readFile(this.#file, "utf8")).replace(/\r?\n$/, "");
    } catch {
      return refused.failure;
    }
    if (this.#refused === undefined) return undefined; // another signature read it first
    if (now === "" || now === refused.pin) return refused.failure;
    this.#value = now;
    this.#refused = undefined;
    return undefined;
  }
}
