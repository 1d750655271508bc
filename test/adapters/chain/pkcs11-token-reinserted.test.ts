/**
 * The PKCS#11 signer when its token is pulled out and put back (a USB HSM re-plugged, an HSM
 * restarted, a token restored from backup): the same key, but the module gives the token another
 * slot. The signer finds it again by PKCS11_TOKEN_LABEL, as at start, and while the token is gone
 * its failures blame the token, never PKCS11_PIN_FILE. SoftHSM, with the key imported (the same
 * key each time the token is made).
 */
import { spawnSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { computeAddress, getBytes, randomBytes, recoverAddress } from "ethers";

import { openPkcs11Signers } from "../../../adapters/chain/index.js";
import { softHsmToken } from "../../helpers/softhsm.js";

function softhsm(args: string[], conf: string): string {
  const run = spawnSync("softhsm2-util", args, { env: { ...process.env, SOFTHSM2_CONF: conf }, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`softhsm2-util ${args[0]}: ${run.stderr}${run.stdout}`);
  return run.stdout;
}

describe("PKCS#11 signer: a token pulled out and put back", function () {
  this.timeout(120_000);

  it("signs again once the token is back in another slot, and blames the token meanwhile, not PKCS11_PIN_FILE", async function () {
    const base = await softHsmToken(`base-${process.pid}`); // this process's SoftHSM directory
    const dir = mkdtempSync(join(tmpdir(), "pkcs11-reinsert-"));
    const pem = join(dir, "key.pem");
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "secp256k1" });
    writeFileSync(pem, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    const jwk = publicKey.export({ format: "jwk" });
    const point = Buffer.concat([Buffer.of(4), Buffer.from(jwk.x!, "base64url"), Buffer.from(jwk.y!, "base64url")]);
    const address = computeAddress(`0x${point.toString("hex")}`);
    const label = `back-${process.pid}`;
    const pin = "1234-reinserted";
    /** Makes the token with the key; its slot, as softhsm2-util says ("reassigned to slot …"). */
    const insert = () => {
      const made = softhsm(
        ["--init-token", "--free", "--label", label, "--pin", pin, "--so-pin", "5678-back"],
        base.conf,
      );
      softhsm(["--import", pem, "--token", label, "--label", "wallet", "--id", "01", "--pin", pin], base.conf);
      return /reassigned to slot (\d+)/.exec(made)?.[1];
    };
    const firstSlot = insert();
    const logged: string[] = [];
    const log = {
      warn: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
      error: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
    };
    const opened = await openPkcs11Signers({
      module: base.module,
      token: { label },
      pin,
      keys: [{ label: "wallet" }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [address],
      sessions: 2,
      timeoutMs: 5_000,
      log,
    });
    try {
      const signer = opened.signers[0]!;
      const d0 = getBytes(randomBytes(32));
      expect(recoverAddress(d0, await signer.signDigest(d0))).to.equal(address);
      softhsm(["--delete-token", "--token", label], base.conf);
      const gone = await signer.signDigest(getBytes(randomBytes(32))).then(
        () => "signed",
        (error: Error) => error.message,
      );
      expect(gone).to.include("cannot sign");
      expect(gone).to.not.include("PKCS11_PIN_FILE");
      expect(logged.join("\n"), "what the log says while the token is gone").to.not.include("PKCS11_PIN_FILE");
      const secondSlot = insert(); // the same key, back, in another slot
      expect(secondSlot, "the token is in another slot").to.not.equal(firstSlot);
      const answers: string[] = [];
      for (let i = 0; i < 3; i++) {
        const d = getBytes(randomBytes(32));
        answers.push(
          await signer.signDigest(d).then(
            (signature) => recoverAddress(d, signature),
            (error: Error) => error.message,
          ),
        );
      }
      expect(answers, "signatures once the token is back").to.deep.equal([address, address, address]);
    } finally {
      await opened.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
