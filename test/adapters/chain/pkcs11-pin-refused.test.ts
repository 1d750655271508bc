/**
 * The PKCS#11 signer when the token refuses the PIN after the start: the PIN rotated on the HSM
 * and the service not told yet, then the token logs the service out (an HSM failover, a session
 * timeout). HSMs lock the user after a few wrong PINs (Luna, CloudHSM, YubiHSM), which stops every
 * application on that partition: the signer must offer the refused PIN once, never per trade,
 * until PKCS11_PIN_FILE changes or the service restarts. SoftHSM behind the tests' shim
 * (test/helpers/pkcs11-shim.ts), which changes the PIN in the signer's process and logs it out,
 * and traces its C_Login calls.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { getBytes, randomBytes, recoverAddress } from "ethers";

import { openPkcs11Signers, type OpenedSigners } from "../../../adapters/chain/index.js";
import { pkcs11Shim } from "../../helpers/pkcs11-shim.js";
import { softHsmToken } from "../../helpers/softhsm.js";

describe("PKCS#11 signer: a PIN the token refuses after the start", function () {
  this.timeout(60_000);
  let opened: OpenedSigners | undefined;
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "pkcs11-pin-"));
  });
  after(async () => {
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("offers the refused PIN once, answers unavailable without logging in again, and signs once PKCS11_PIN_FILE holds the new one", async function () {
    const token = await softHsmToken(`pin-${process.pid}`);
    const key = await token.newKey("wallet");
    const shim = pkcs11Shim(this, token);
    const pinFile = join(dir, "pin");
    writeFileSync(pinFile, `${token.pin}\n`);
    const logged: Array<{ level: string; fields: object; message: string }> = [];
    const log = {
      warn: (fields: object, message: string) => logged.push({ level: "warn", fields, message }),
      error: (fields: object, message: string) => logged.push({ level: "error", fields, message }),
    };
    opened = await openPkcs11Signers({
      module: shim.module,
      token: { label: token.label },
      pin: token.pin,
      pinFile,
      keys: [{ label: key.label }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [key.address],
      sessions: 2,
      timeoutMs: 3_000,
      log,
    });
    const signer = opened.signers[0]!;
    await signer.signDigest(getBytes(randomBytes(32)));
    const rotated = "rotated-pin-0001";
    shim.setPin(token.pin, rotated); // the PIN rotated on the token
    shim.next("logout"); // and the token logs the signer out: its next login is with the old PIN
    const answers: string[] = [];
    for (let i = 0; i < 10; i++)
      answers.push(
        await signer.signDigest(getBytes(randomBytes(32))).then(
          () => "signed",
          (error: Error) => error.message,
        ),
      );
    expect(
      answers.every((answer) => answer.includes("cannot sign")),
      answers.join("\n"),
    ).to.equal(true);
    const refusedLogins = shim.calls().filter((call) => call === "C_Login 0xa0"); // CKR_PIN_INCORRECT
    expect(refusedLogins.length, "logins the token refused (CKR_PIN_INCORRECT)").to.equal(1);
    const errors = logged.filter((line) => line.level === "error");
    expect(errors.length, "one error logged").to.equal(1);
    expect(JSON.stringify(errors[0])).to.include("PKCS11_PIN_FILE");
    expect(JSON.stringify(logged)).to.not.include(token.pin);
    expect(JSON.stringify(logged)).to.not.include(rotated);

    writeFileSync(pinFile, `${rotated}\n`); // the operator puts the new PIN in the file
    const digest = getBytes(randomBytes(32));
    expect(recoverAddress(digest, await signer.signDigest(digest)), "signed with the new PIN").to.equal(key.address);
    expect(shim.calls().filter((call) => call === "C_Login 0xa0").length, "no other refused login").to.equal(1);
    shim.remove();
  });
});
