/**
 * A process for pkcs11-token-stops-answering.test.ts: opens the signer on the shim (C_Sign held,
 * SHIM_HANG_C_SIGN), has one signature time out with the call still in the token, closes the
 * signers as the service's shutdown does, and only then lets the token answer: a module
 * finalised under that call would take this process down (SIGSEGV) when it returns.
 *   Usage: node --import tsx pkcs11-close-child.ts <module> <token label> <pin> <key label> <address>
 */
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { getBytes, randomBytes } from "ethers";

import { openPkcs11Signers } from "../../adapters/chain/index.js";

// Mocha loads every file under test/: run only as the test's child process, not on import.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [module, label, pin, keyLabel, address] = process.argv.slice(2) as [string, string, string, string, string];
  const opened = await openPkcs11Signers({
    module,
    token: { label },
    pin,
    keys: [{ label: keyLabel }],
    keyVariable: "PKCS11_KEY_LABELS",
    addresses: [address],
    sessions: 2,
    timeoutMs: 300,
  });
  const outcome = await opened.signers[0]!.signDigest(getBytes(randomBytes(32))).then(
    () => "signed",
    (error: Error) => (error.message.includes("cannot sign") ? "refused" : error.message),
  );
  process.stdout.write(`signature: ${outcome}\n`);
  await opened.close(); // the service's shutdown (chain-source.ts)
  process.stdout.write("closed\n");
  rmSync(process.env.SHIM_HANG_C_SIGN!, { force: true }); // the token answers at last
  await new Promise((resolve) => setTimeout(resolve, 300));
  process.stdout.write("exited cleanly\n");
}
