/**
 * The service's signers as ethers Signers, for the scripts that send a wallet's own transactions
 * at set-up (`npm run deploy`'s approvals, the tests' deployments): every signature is asked of
 * the HSM or KMS through the TransactionSigner port and checked as the service checks it, so no
 * key ever leaves the HSM, even at set-up. The signers are configured by the service's own
 * variables (SIGNER, EXCHANGE_ADDRESSES, PKCS11_* or KMS_KEY_IDS).
 */
import {
  AbstractSigner,
  getAddress,
  hashMessage,
  type Provider,
  type TransactionRequest,
  type TypedDataDomain,
  type TypedDataField,
  TypedDataEncoder,
  resolveAddress,
} from "ethers";

import {
  openKmsSigners,
  openPkcs11Signers,
  type OpenedSigners,
  SignerStartError,
  signEip1559With,
  type TransactionSigner,
} from "../adapters/chain/index.js";
import { parseEnvironment } from "../adapters/config/env/schema.js";
import { signerConfig } from "../adapters/config/env/signer.js";

/** An ethers Signer over a TransactionSigner: EIP-1559 transactions to a contract, messages, typed data. */
export class SignerWallet extends AbstractSigner {
  readonly #signer: TransactionSigner;

  constructor(signer: TransactionSigner, provider: Provider | null = null) {
    super(provider);
    this.#signer = signer;
  }

  get address(): string {
    return this.#signer.address;
  }

  override async getAddress(): Promise<string> {
    return this.#signer.address;
  }

  override connect(provider: Provider | null): SignerWallet {
    return new SignerWallet(this.#signer, provider);
  }

  /** @throws Error for a contract creation or a transaction that is not EIP-1559 (the port signs those only) */
  override async signTransaction(request: TransactionRequest): Promise<string> {
    const tx = await this.populateTransaction(request);
    if (tx.to === null || tx.to === undefined) throw new Error("SignerWallet: cannot sign a contract creation");
    if (tx.type !== 2 && tx.type !== null && tx.type !== undefined)
      throw new Error(`SignerWallet: signs EIP-1559 transactions only, not type ${tx.type}`);
    if (tx.from && getAddress(await resolveAddress(tx.from)) !== this.#signer.address)
      throw new Error(`SignerWallet: transaction from ${String(tx.from)}, not from ${this.#signer.address}`);
    const { rawTx } = await signEip1559With(this.#signer, {
      chainId: BigInt(tx.chainId ?? 0),
      nonce: Number(tx.nonce),
      maxFeePerGas: BigInt(tx.maxFeePerGas ?? 0),
      maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas ?? 0),
      gasLimit: BigInt(tx.gasLimit ?? 0),
      to: getAddress(await resolveAddress(tx.to)),
      value: BigInt(tx.value ?? 0),
      data: tx.data ?? "0x",
    });
    return rawTx;
  }

  override async signMessage(message: string | Uint8Array): Promise<string> {
    return (await this.#signer.signDigest(Buffer.from(hashMessage(message).slice(2), "hex"))).serialized;
  }

  override async signTypedData(
    domain: TypedDataDomain,
    types: Record<string, TypedDataField[]>,
    value: Record<string, unknown>,
  ): Promise<string> {
    const digest = TypedDataEncoder.hash(domain, types, value);
    return (await this.#signer.signDigest(Buffer.from(digest.slice(2), "hex"))).serialized;
  }
}

/**
 * The signers the service would open with `env` (SIGNER=pkcs11 or aws-kms), each checked against
 * its wallet address; undefined for SIGNER=key or unset.
 * @throws Error listing what is wrong, each problem naming its variable (never the PIN)
 */
export async function openConfiguredSigners(env: NodeJS.ProcessEnv): Promise<OpenedSigners | undefined> {
  const problems: string[] = [];
  const config = signerConfig(parseEnvironment(env), problems);
  if (problems.length > 0) throw new Error(problems.join("\n  - "));
  if (config === undefined) return undefined;
  // A refused signature's detail (the token, the KMS key, why), on the operator's terminal.
  const log = {
    warn: (fields: object, message: string) => console.error(`${message}: ${JSON.stringify(fields)}`),
    error: (fields: object, message: string) => console.error(`${message}: ${JSON.stringify(fields)}`),
  };
  try {
    return config.kind === "pkcs11"
      ? await openPkcs11Signers({ ...config, log })
      : await openKmsSigners({ ...config, log });
  } catch (error) {
    if (error instanceof SignerStartError) throw new Error(error.message);
    throw error;
  }
}
