/**
 * `npm run signer`: keys in an HSM for development (docs/operations.md "Keys in an HSM or KMS").
 *
 *   npm run signer -- pkcs11 init [--token dev] [--dir .dev/softhsm]
 *       a SoftHSM token (softhsm2 and opensc installed from Debian's packages when missing, as
 *       root), its random PIN in <dir>/<token>.pin; prints the variables that point the service at it;
 *   npm run signer -- pkcs11 new-key --label <label> [--token dev] [--dir .dev/softhsm]
 *       a secp256k1 key pair generated on the token, never extractable; prints its address, the
 *       wallet to fund, and the variables that name it.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { type DevToken, initDevToken, newKey, softHsmModule } from "./signer-pkcs11.js";

const USAGE = `usage: npm run signer -- pkcs11 init [--token <label>] [--dir <dir>]
       npm run signer -- pkcs11 new-key --label <key label> [--token <label>] [--dir <dir>]`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

const [kind, command, ...rest] = process.argv.slice(2);
if (kind !== "pkcs11") fail(kind === undefined ? "a signer kind is required" : `${kind}: not a signer kind`);
const { values } = parseArgs({
  args: rest,
  options: {
    token: { type: "string", default: "dev" },
    dir: { type: "string", default: ".dev/softhsm" },
    label: { type: "string" },
  },
  strict: true,
});
const dir = resolve(values.dir);
const conf = join(dir, "softhsm2.conf");

if (command === "init") {
  if (existsSync(join(dir, `${values.token}.pin`)))
    fail(`init: the token "${values.token}" exists already in ${values.dir} (its PIN: ${values.token}.pin)`);
  const token = await initDevToken(dir, values.token);
  process.stdout.write(
    `A SoftHSM token "${token.label}" in ${values.dir}; its PIN is in ${token.pinFile} (mode 0600).\n` +
      `Next: npm run signer -- pkcs11 new-key --label exchange-1${values.token === "dev" ? "" : ` --token ${values.token}`}\n\n` +
      `SOFTHSM2_CONF=${token.conf}\nSIGNER=pkcs11\nPKCS11_MODULE=${token.module}\n` +
      `PKCS11_TOKEN_LABEL=${token.label}\nPKCS11_PIN_FILE=${token.pinFile}\n`,
  );
} else if (command === "new-key") {
  if (values.label === undefined || values.label === "") fail("new-key: --label is required");
  if (!existsSync(conf)) fail(`new-key: no SoftHSM configuration in ${values.dir}: run npm run signer -- pkcs11 init`);
  process.env.SOFTHSM2_CONF = conf;
  const token: DevToken = {
    conf,
    module: softHsmModule(),
    label: values.token,
    pinFile: join(dir, `${values.token}.pin`),
  };
  const { address, id } = await newKey(token, values.label);
  process.stdout.write(
    `A secp256k1 key "${values.label}" (id ${id}) on the token "${token.label}": the wallet to fund is\n\n` +
      `  ${address}\n\nPKCS11_KEY_LABELS=${values.label}\nEXCHANGE_ADDRESSES=${address}\n`,
  );
} else {
  fail(command === undefined ? "pkcs11: a command is required" : `pkcs11: ${command} is not a command`);
}
