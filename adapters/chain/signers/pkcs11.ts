/**
 * The PKCS#11 signer (SIGNER=pkcs11): the wallets' keys stay in an HSM (or SoftHSM, for trying
 * it), and the service only ever holds their public keys and the PIN. The token is used from a
 * process of its own (pkcs11-process.ts), never from the service's.
 *
 * At start each key's address is derived from its public key (CKA_EC_POINT) and must be the
 * wallet address the operator named for it (EXCHANGE_ADDRESSES), so a wrong key is found before
 * any trade. A signature is CKM_ECDSA over the transaction's digest: `r‖s`, normalised to a low
 * `s`, its recovery id found by trial recovery against the wallet's address (recovery.ts); the
 * transaction encoder checks it once more before anything is broadcast (assertSignedBy). A token
 * that cannot sign (no answer within SIGNER_TIMEOUT_MS, or still failing once its sessions were
 * opened again) fails the trade as unavailable, with nothing sent.
 */
import type { Signature } from "ethers";

import type { SignOptions, TransactionSigner } from "../tx/index.js";
import { SignerStartError, signerUnavailable } from "./errors.js";
import { type ProcessSettings, TokenProcess, TokenUnavailable } from "./pkcs11-process.js";
import type { KeyRef } from "./pkcs11-token.js";
import { addressOfEcPoint, rawSignature, recoverableSignature } from "./recovery.js";

export type { SignerLog } from "./pkcs11-process.js";
export type { KeyRef } from "./pkcs11-token.js";

export interface Pkcs11SignerSettings extends Omit<ProcessSettings, "keyVariable"> {
  /** Each wallet's key, in the order of `addresses`; `keyVariable` names the setting they come from. */
  keys: readonly KeyRef[];
  keyVariable: "PKCS11_KEY_LABELS" | "PKCS11_KEY_IDS";
  /** The wallet addresses the operator expects (EXCHANGE_ADDRESSES), one per key. */
  addresses: readonly string[];
}

export interface OpenedSigners {
  signers: TransactionSigner[];
  /** Lets the keys go (the token's process, the KMS client's connections): at shutdown. */
  close(): Promise<void>;
}

/**
 * Opens the token and one signer per key.
 * @throws SignerStartError naming the variable when the module, the token, the PIN or a key is
 *   wrong, or a key is not the wallet named for it
 */
export async function openPkcs11Signers(settings: Pkcs11SignerSettings): Promise<OpenedSigners> {
  if (settings.keys.length !== settings.addresses.length)
    throw new SignerStartError(
      "EXCHANGE_ADDRESSES",
      `names ${settings.addresses.length} wallet(s) for ${settings.keys.length} key(s) in ${settings.keyVariable}: one address per key`,
    );
  let token: TokenProcess;
  try {
    token = await TokenProcess.start(settings);
  } catch (error) {
    if (!(error instanceof TokenUnavailable)) throw error;
    const fallback = "label" in settings.token ? "PKCS11_TOKEN_LABEL" : "PKCS11_SLOT";
    throw new SignerStartError(("variable" in error.failure && error.failure.variable) || fallback, error.message);
  }
  try {
    const signers = settings.keys.map((ref, index) => {
      const address = addressOfEcPoint(Buffer.from(token.points[index]!, "hex"));
      const expected = settings.addresses[index]!;
      if (address.toLowerCase() !== expected.toLowerCase()) {
        const which = "label" in ref ? `labelled "${ref.label}"` : `with id ${ref.id}`;
        throw new SignerStartError(
          "EXCHANGE_ADDRESSES",
          `the key ${which} on the token "${token.name}" is the key of ${address}, not of ${expected}`,
        );
      }
      return pkcs11Signer(token, index, address, settings);
    });
    return { signers, close: () => token.close() };
  } catch (error) {
    await token.close();
    throw error;
  }
}

function pkcs11Signer(
  token: TokenProcess,
  index: number,
  address: string,
  settings: Pkcs11SignerSettings,
): TransactionSigner {
  const what = `PKCS#11 token "${token.name}"`;
  return {
    address,
    concurrency: settings.sessions,
    async signDigest(digest: Uint8Array, options?: SignOptions): Promise<Signature> {
      let raw: Buffer;
      try {
        raw = await token.sign(index, digest, (options?.startedAt ?? Date.now()) + settings.timeoutMs);
      } catch (error) {
        throw signerUnavailable(address, what, (error as Error).message, settings.log);
      }
      const { r, s } = rawSignature(raw);
      return recoverableSignature(address, digest, r, s);
    },
  };
}
