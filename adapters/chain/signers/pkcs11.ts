/**
 * The PKCS#11 signer (SIGNER=pkcs11): the wallets' keys stay in an HSM (or SoftHSM, for trying
 * it), and the service only ever holds their public keys and the PIN.
 *
 * At start each key's address is derived from its public key (CKA_EC_POINT) and must be the
 * wallet address the operator named for it (EXCHANGE_ADDRESSES), so a wrong key is found before
 * any trade. A signature is CKM_ECDSA over the transaction's digest: `r‖s`, normalised to a low
 * `s`, its recovery id found by trial recovery against the wallet's address (recovery.ts); the
 * transaction encoder checks it once more before anything is broadcast (assertSignedBy). A token
 * that cannot sign (it does not answer within SIGNER_TIMEOUT_MS, or still fails once its
 * sessions were opened again) fails the trade as unavailable, with nothing sent.
 */
import type { Signature } from "ethers";

import type { TransactionSigner } from "../tx/index.js";
import { SignerStartError, signerUnavailable, withTimeout } from "./errors.js";
import { type KeyRef, Pkcs11Token, pkcs11Reason, type TokenSettings } from "./pkcs11-token.js";
import { rawSignature, recoverableSignature } from "./recovery.js";

export type { KeyRef } from "./pkcs11-token.js";

export interface Pkcs11SignerSettings extends TokenSettings {
  /** Each wallet's key, in the order of `addresses`; `keyVariable` names the setting they come from. */
  keys: readonly KeyRef[];
  keyVariable: "PKCS11_KEY_LABELS" | "PKCS11_KEY_IDS";
  /** The wallet addresses the operator expects (EXCHANGE_ADDRESSES), one per key. */
  addresses: readonly string[];
  /** How long one signature may take, in ms. */
  timeoutMs: number;
}

export interface OpenedSigners {
  signers: TransactionSigner[];
  /** Lets the keys go (logs out, unloads the module): at shutdown. */
  close(): void;
}

/**
 * Opens the token and one signer per key.
 * @throws SignerStartError naming the variable when the module, the token, the PIN or a key is
 *   wrong, or a key is not the wallet named for it
 */
export function openPkcs11Signers(settings: Pkcs11SignerSettings): OpenedSigners {
  if (settings.keys.length !== settings.addresses.length)
    throw new SignerStartError(
      "EXCHANGE_ADDRESSES",
      `names ${settings.addresses.length} wallet(s) for ${settings.keys.length} key(s) in ${settings.keyVariable}: one address per key`,
    );
  const token = Pkcs11Token.open(settings);
  try {
    const signers = settings.keys.map((ref, index) => {
      const address = token.addKey(ref, settings.keyVariable);
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
    token.close();
    throw error;
  }
}

function pkcs11Signer(
  token: Pkcs11Token,
  index: number,
  address: string,
  settings: Pkcs11SignerSettings,
): TransactionSigner {
  const what = `PKCS#11 token "${token.name}"`;
  return {
    address,
    concurrency: settings.sessions,
    async signDigest(digest: Uint8Array): Promise<Signature> {
      let raw: Buffer;
      try {
        raw = await withTimeout(token.sign(index, digest), settings.timeoutMs, () =>
          signerUnavailable(address, what, `no answer within ${settings.timeoutMs} ms`),
        );
      } catch (error) {
        if (error instanceof Error && error.name === "ChainUnavailableError") throw error;
        throw signerUnavailable(address, what, pkcs11Reason(error));
      }
      const { r, s } = rawSignature(raw);
      return recoverableSignature(address, digest, r, s);
    },
  };
}
