/**
 * secp256k1's OID (1.3.132.0.10) as DER, which a PKCS#11 key's CKA_EC_PARAMS and a KMS key's
 * SubjectPublicKeyInfo name: on its own, so that the PKCS#11 signer's process (pkcs11-host.ts)
 * checks a key's curve without loading ethers.
 */
export const SECP256K1_OID = Uint8Array.of(0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a);
