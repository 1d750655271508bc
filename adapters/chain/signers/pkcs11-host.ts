/**
 * The PKCS#11 signer's own process (started by pkcs11-process.ts): it alone loads the vendor's
 * module, holds the sessions and the login, and makes the PKCS#11 calls (pkcs11-token.ts), so a
 * token that stops answering blocks this process and never the service's event loop or its
 * libuv pool; the service can kill it and start another. It answers the service's messages
 * (pkcs11-protocol.ts) and nothing else: it writes no logs, and leaves when the service's end
 * of the channel closes (even on kill -9 of the service).
 */
import { isPkcs11jsMissing, PKCS11JS_MISSING } from "./pkcs11-failure.js";
import type { Failure, FromHost, HostSettings, ToHost } from "./pkcs11-protocol.js";
import type { Pkcs11Token, Ticket } from "./pkcs11-token.js";

type TokenModule = typeof import("./pkcs11-token.js");

const send = (message: FromHost) => {
  if (process.connected) process.send!(message);
};

let code: TokenModule | undefined;
let token: Pkcs11Token | undefined;
/** The signatures asked for and not answered yet. */
const tickets = new Map<number, Ticket>();

function failureOf(error: unknown): Failure {
  if (code === undefined) return { kind: "sign", detail: String(error) };
  const kind = code.failureKind(error);
  const variable = error instanceof code.TokenFailure ? error.variable : undefined;
  return { kind, detail: code.pkcs11Reason(error), ...(variable === undefined ? {} : { variable }) };
}

async function open(settings: HostSettings): Promise<FromHost> {
  try {
    code = await import("./pkcs11-token.js");
  } catch (error) {
    if (!isPkcs11jsMissing(error)) throw error;
    return { type: "refused", failure: { kind: "binding", variable: "SIGNER", detail: PKCS11JS_MISSING } };
  }
  try {
    token = code.Pkcs11Token.open(settings);
    const points = settings.keys.map((ref) => token!.addKey(ref, settings.keyVariable).toString("hex"));
    return { type: "opened", name: token.name, points };
  } catch (error) {
    token?.close();
    token = undefined;
    return { type: "refused", failure: failureOf(error) };
  }
}

function sign(id: number, key: number, digest: string): void {
  const ticket: Ticket = { cancelled: false };
  tickets.set(id, ticket);
  token!
    .sign(key, Buffer.from(digest, "hex"), ticket)
    .then(
      (signature) => send({ type: "signed", id, signature: signature.toString("hex") }),
      (error: unknown) => send({ type: "failed", id, failure: failureOf(error) }),
    )
    .finally(() => tickets.delete(id));
}

/** The caller gave up: a signature still waiting for a session leaves the queue, and the token never sees it. */
function cancel(id: number): void {
  const ticket = tickets.get(id);
  const since = ticket?.inTokenSince;
  if (ticket !== undefined && since === undefined) {
    ticket.cancelled = true;
    ticket.leave?.();
  }
  send({ type: "cancelled", id, ...(since === undefined ? {} : { inTokenMs: performance.now() - since }) });
}

/** Leaves once no C_Sign is in the token (the module finalised), or after `graceMs` without finalising it. */
async function close(graceMs: number): Promise<never> {
  const until = performance.now() + graceMs;
  while (token?.signing && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
  if (token?.signing) process.kill(process.pid, "SIGKILL"); // a call is still in the module: it goes with the process
  token?.close();
  process.exit(0);
}

process.on("disconnect", () => process.exit(0));
process.on("message", (message: ToHost) => {
  switch (message.type) {
    case "open":
      void open(message.settings).then(send);
      break;
    case "sign":
      sign(message.id, message.key, message.digest);
      break;
    case "cancel":
      cancel(message.id);
      break;
    case "close":
      void close(message.graceMs);
      break;
  }
});
