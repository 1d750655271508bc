/**
 * A KMS-protocol HTTP server of the tests' (and the bench's) own, on 127.0.0.1, for the AWS KMS
 * signer: the real @aws-sdk/client-kms talks to it through AWS_ENDPOINT_URL_KMS. It speaks JSON 1.1 as AWS's API
 * reference has it (`X-Amz-Target: TrentService.GetPublicKey` and `TrentService.Sign`, content type
 * application/x-amz-json-1.1, errors as HTTP 400 with `__type` and `message`), answers a DER
 * SubjectPublicKeyInfo for ECC_SECG_P256K1 keys and DER ECDSA signatures, and the errors AWS
 * documents: NotFoundException, DisabledException, ThrottlingException.
 *
 * A digest is signed as KMS signs one (MessageType DIGEST): the 32 bytes as they are, with
 * libsecp256k1 (tiny-secp256k1), since node's crypto.sign would hash them again. Like KMS, it
 * does not normalise `s`: half of its signatures carry the high one.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { computeAddress, hexlify } from "ethers";
import { pointFromScalar, sign } from "tiny-secp256k1";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const REGION = "eu-central-2";
const ACCOUNT = "111122223333";

interface Key {
  id: string;
  arn: string;
  secret: Uint8Array;
  spki: Buffer;
  address: string;
  enabled: boolean;
}

/** DER INTEGER of a non-negative bigint, minimal. */
function derInteger(n: bigint): Buffer {
  let hex = n.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let bytes = Buffer.from(hex, "hex");
  if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.of(0), bytes]);
  return Buffer.concat([Buffer.of(0x02, bytes.length), bytes]);
}

/** An error as KMS answers one: HTTP 400, its type in `__type`. */
function error(type: string, message: string): { status: number; json: unknown } {
  return { status: 400, json: { __type: type, message } };
}

export function derSignatureOf(r: bigint, s: bigint): Buffer {
  const body = Buffer.concat([derInteger(r), derInteger(s)]);
  return Buffer.concat([Buffer.of(0x30, body.length), body]);
}

export interface KmsServer {
  /** What AWS_ENDPOINT_URL_KMS is set to. */
  url: string;
  /** A new enabled key; `alias` (without "alias/") names it too. */
  createKey(alias?: string): { keyId: string; arn: string; address: string };
  disable(keyId: string): void;
  enable(keyId: string): void;
  /** The next `count` Sign calls answer ThrottlingException. */
  throttle(count: number): void;
  /** Every answer waits this long first (ms). */
  delayMs: number;
  /** Calls received, by target (TrentService.Sign …), and their Authorization headers' scheme. */
  readonly calls: Array<{ target: string; keyId: string; signed: boolean }>;
  close(): Promise<void>;
}

/** GetPublicKey's answer: the key's DER SubjectPublicKeyInfo and what it is for. */
function publicKeyOf(key: Key): { status: number; json: unknown } {
  return {
    status: 200,
    json: {
      KeyId: key.arn,
      PublicKey: key.spki.toString("base64"),
      KeySpec: "ECC_SECG_P256K1",
      CustomerMasterKeySpec: "ECC_SECG_P256K1",
      KeyUsage: "SIGN_VERIFY",
      SigningAlgorithms: ["ECDSA_SHA_256"],
    },
  };
}

/** Sign's answer: the digest signed as it is, a DER signature whose s is high half of the time, as KMS's may be. */
function signature(key: Key, body: Record<string, unknown>): { status: number; json: unknown } {
  if (body.MessageType !== "DIGEST" || body.SigningAlgorithm !== "ECDSA_SHA_256")
    return error("ValidationException", "this server signs digests with ECDSA_SHA_256 only");
  const digest = Buffer.from(String(body.Message ?? ""), "base64");
  if (digest.length !== 32)
    return error("ValidationException", "Digest is invalid length for algorithm ECDSA_SHA_256.");
  const compact = sign(digest, key.secret);
  const r = BigInt(hexlify(compact.subarray(0, 32)));
  const low = BigInt(hexlify(compact.subarray(32)));
  const s = randomBytes(1)[0]! & 1 ? N - low : low;
  return {
    status: 200,
    json: { KeyId: key.arn, Signature: derSignatureOf(r, s).toString("base64"), SigningAlgorithm: "ECDSA_SHA_256" },
  };
}

export async function startKmsServer(): Promise<KmsServer> {
  const keys = new Map<string, Key>();
  const aliases = new Map<string, string>();
  let throttled = 0;
  const calls: KmsServer["calls"] = [];
  const state = { delayMs: 0 };

  const find = (keyId: string): Key | undefined => {
    const alias = keyId.startsWith("arn:") && keyId.includes(":alias/") ? `alias/${keyId.split(":alias/")[1]}` : keyId;
    const id = aliases.get(alias) ?? (keyId.startsWith("arn:") ? keyId.split(":key/")[1] : keyId);
    return id === undefined ? undefined : keys.get(id);
  };

  const answer = (target: string, body: Record<string, unknown>) => {
    const keyId = String(body.KeyId ?? "");
    const key = find(keyId);
    if (!key) return error("NotFoundException", `Key '${keyId}' does not exist`);
    if (!key.enabled) return error("DisabledException", `${key.arn} is disabled.`);
    if (target === "TrentService.GetPublicKey") return publicKeyOf(key);
    if (target !== "TrentService.Sign") return error("UnsupportedOperationException", `${target} is not served here`);
    if (throttled > 0) {
      throttled -= 1;
      return error("ThrottlingException", "Rate exceeded");
    }
    return signature(key, body);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const target = String(req.headers["x-amz-target"] ?? "");
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>;
      } catch {
        // answered below as a missing key
      }
      calls.push({
        target,
        keyId: String(body.KeyId ?? ""),
        signed: String(req.headers.authorization ?? "").startsWith("AWS4-HMAC-SHA256 Credential="),
      });
      const { status, json } = answer(target, body);
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(status, {
          "content-type": "application/x-amz-json-1.1",
          "x-amzn-requestid": randomBytes(16).toString("hex"),
        });
        res.end(JSON.stringify(json));
      }, state.delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    createKey(alias) {
      const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "secp256k1" });
      const secret = Buffer.from(privateKey.export({ format: "jwk" }).d!, "base64url");
      // The public half as a DER SubjectPublicKeyInfo, written by node's crypto, as KMS answers it.
      const spki = publicKey.export({ type: "spki", format: "der" });
      const id = randomUUID();
      const key: Key = {
        id,
        arn: `arn:aws:kms:${REGION}:${ACCOUNT}:key/${id}`,
        secret,
        spki,
        address: computeAddress(hexlify(pointFromScalar(secret, false)!)),
        enabled: true,
      };
      keys.set(id, key);
      if (alias !== undefined) aliases.set(`alias/${alias}`, id);
      return { keyId: id, arn: key.arn, address: key.address };
    },
    disable: (keyId) => {
      find(keyId)!.enabled = false;
    },
    enable: (keyId) => {
      find(keyId)!.enabled = true;
    },
    throttle: (count) => {
      throttled = count;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** The SDK's environment for the server: static credentials, no instance-metadata probe, a region. */
export function kmsEnv(server: KmsServer): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_KMS: server.url,
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE",
    AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    AWS_EC2_METADATA_DISABLED: "true",
  };
}
