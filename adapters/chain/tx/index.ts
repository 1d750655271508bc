/**
 * What the service sends, before any node sees it: the contracts' ABIs, the swap calldata, the
 * EIP-1559 encoding and signing, and the signer port with its key. No I/O but a keystore's file;
 * it imports no other folder of the chain adapter.
 */
export { AGGREGATOR_ABI, ERC20_ABI, SWAP_ABI, pickAbi } from "./abi.js";
export { staticCallEncoder, type StaticArg } from "./calldata.js";
export { signEip1559, signEip1559With, type Eip1559Transaction, type SignedTransaction } from "./eip1559.js";
export {
  KeystoreError,
  SignatureRefusedError,
  keystoreSigner,
  rawKeySigner,
  toSigner,
  type SignOptions,
  type TransactionSigner,
} from "./signer.js";
export { WasmSigningKey } from "./signing-key.js";
