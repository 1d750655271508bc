/**
 * The pipelining flood of `npm run bench` (issue 26): for 1 s, connections from 127.0.0.1 each
 * pipeline 2,000 `/healthz` requests and never read an answer, from a process of their own, while
 * a new client from 127.0.0.2 asks `/healthz` every 50 ms, during the flood and for a second after.
 */
import { fork } from "node:child_process";
import * as http from "node:http";
import * as net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

const FLOOD = Buffer.from("GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n".repeat(2_000), "latin1");

/** The attacker (`--role flood --port P`): 1 s of flooding connections, 16 opened at a time; prints how many. */
export async function flood(port: number): Promise<void> {
  const sockets: net.Socket[] = [];
  const ends = Date.now() + 1_000;
  while (Date.now() < ends) {
    await Promise.all(
      Array.from(
        { length: 16 },
        () =>
          new Promise<void>((resolve) => {
            const socket = net.connect({ port, host: "127.0.0.1" });
            sockets.push(socket);
            socket.on("error", () => {});
            socket.once("close", () => resolve());
            socket.once("connect", () => {
              socket.pause(); // never reads its answers
              socket.write(FLOOD);
              resolve();
            });
          }),
      ),
    );
  }
  process.send?.({ connections: sockets.length });
  await sleep(1_000);
  for (const socket of sockets) socket.destroy();
}

/** One new client's `/healthz`, from another address: milliseconds to its whole answer (Infinity if refused). */
function probe(port: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve) => {
    const request = http.get(
      { host: "127.0.0.1", port, path: "/healthz", localAddress: "127.0.0.2", agent: false },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200 ? performance.now() - started : Infinity));
      },
    );
    request.on("error", () => resolve(Infinity));
  });
}

export interface FloodResult {
  /** The slowest probe without a flood (20 in a row), then during it and in the second after. */
  quietMs: number;
  duringMs: number;
  afterMs: number;
  connections: number;
}

/** Runs the flood against the service on `port` (the attacker forked from `self`) and probes it. */
export async function measureFlood(self: string, port: number): Promise<FloodResult> {
  const quiet: number[] = [];
  for (let i = 0; i < 20; i++) quiet.push(await probe(port));
  const attacker = fork(self, ["--role", "flood", "--port", String(port)], { stdio: "inherit" });
  const launched = new Promise<number>((resolve) => {
    attacker.once("message", (message) => resolve((message as { connections: number }).connections));
  });
  const exited = new Promise((resolve) => attacker.once("exit", resolve));
  const during: Promise<number>[] = [];
  let flooding = true;
  const connections = launched.then((count) => {
    flooding = false;
    return count;
  });
  while (flooding) {
    during.push(probe(port));
    await sleep(50);
  }
  const after: Promise<number>[] = [];
  for (let i = 0; i < 20; i++) {
    after.push(probe(port));
    await sleep(50);
  }
  await exited;
  return {
    quietMs: Math.max(...quiet),
    duringMs: Math.max(...(await Promise.all(during))),
    afterMs: Math.max(...(await Promise.all(after))),
    connections: await connections,
  };
}
