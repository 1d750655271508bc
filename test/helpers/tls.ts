/** A throwaway self-signed certificate for localhost and 127.0.0.1, made with openssl, for the TLS tests. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface SelfSigned {
  cert: Buffer;
  /** The certificate's file, for a client in another process. */
  certFile: string;
  key: Buffer;
  /** Removes the files. */
  remove(): void;
}

/** The certificate and its key, or undefined when this machine has no openssl. */
export function selfSignedCertificate(): SelfSigned | undefined {
  const dir = mkdtempSync(join(tmpdir(), "tls-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    execFileSync(
      "openssl",
      [
        ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"],
        ...["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        ...["-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")],
      ],
      { stdio: "ignore" },
    );
    const certFile = join(dir, "cert.pem");
    return { cert: readFileSync(certFile), certFile, key: readFileSync(join(dir, "key.pem")), remove };
  } catch {
    remove();
    return undefined;
  }
}
