/** The embedded chain in its own process (scripts/embedded-chain/parent.ts), as npm start runs it. */
import { Writable } from "node:stream";

import { expect } from "chai";
import { JsonRpcProvider, Network } from "ethers";
import { pino } from "pino";

import { startEmbeddedChainProcess } from "../../../scripts/embedded-chain/parent.js";

describe("the embedded chain process", function () {
  it("serves the deployed suite over JSON-RPC, forwards its log lines, and stops on close", async function () {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean))
          lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const chain = await startEmbeddedChainProcess({ chainPort: 0, log: pino({ level: "info" }, destination) });
    const provider = new JsonRpcProvider(chain.rpcUrl, Network.from(chain.chainId), { staticNetwork: true });
    try {
      expect(Number((await provider.getNetwork()).chainId)).to.equal(chain.chainId);
      expect(await provider.getCode(chain.addresses.swap)).to.not.equal("0x");
      const ready = lines.find((line) => line.msg === "embedded chain ready");
      expect(ready, 'the child\'s "embedded chain ready" line').to.not.equal(undefined);
      expect(ready).to.include({ level: 30, swap: chain.addresses.swap, rpcUrl: chain.rpcUrl });
    } finally {
      provider.destroy();
      await chain.close();
    }
    const after = new JsonRpcProvider(chain.rpcUrl, Network.from(chain.chainId), { staticNetwork: true });
    const thrown = await after.send("eth_chainId", []).then(
      () => undefined,
      (error: unknown) => error,
    );
    after.destroy();
    expect(thrown, "the chain still answers after close").to.be.instanceOf(Error);
  });

  it("rejects with the child's error when the chain cannot start", async function () {
    const first = await startEmbeddedChainProcess({ chainPort: 0, log: pino({ level: "silent" }) });
    try {
      const port = Number(new URL(first.rpcUrl).port);
      const thrown = await startEmbeddedChainProcess({ chainPort: port, log: pino({ level: "silent" }) }).then(
        async (second) => {
          await second.close();
        },
        (error: unknown) => error,
      );
      expect(thrown).to.be.instanceOf(Error);
      expect((thrown as Error).message).to.match(/EADDRINUSE|address already in use/i);
    } finally {
      await first.close();
    }
  });
});
