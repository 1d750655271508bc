/** The tests' KMS-protocol server (scripts/kms-local-server.ts, which the bench uses too). */
export { derSignatureOf, kmsEnv, startKmsServer, type KmsServer } from "../../scripts/kms-local-server.js";
