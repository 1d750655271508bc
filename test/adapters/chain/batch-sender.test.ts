/**
 * batchSenderOf (adapters/chain/rpc/batch-sender.ts) for a provider without sendBatch: the calls
 * one at a time, in order; after a failed send the later sends are not tried (a node would hold
 * their nonces behind it), but "already known" is no failure (the node has it).
 */
import { expect } from "chai";
import type { JsonRpcApiProvider } from "ethers";

import { NotSentError, batchSenderOf } from "../../../adapters/chain/rpc/index.js";

function node(refuse: Record<string, string>): { sent: string[]; provider: JsonRpcApiProvider } {
  const sent: string[] = [];
  const provider = {
    send: async (method: string, params: unknown[]) => {
      if (method !== "eth_sendRawTransaction") return null;
      const raw = String(params[0]);
      sent.push(raw);
      if (refuse[raw] !== undefined) throw new Error(refuse[raw]);
      return `0xhash${raw}`;
    },
  } as unknown as JsonRpcApiProvider;
  return { sent, provider };
}

const sends = (...raws: string[]) => raws.map((raw) => ({ method: "eth_sendRawTransaction", params: [raw] }));

describe("batchSenderOf, for a provider without sendBatch", function () {
  it("sends in order and leaves the sends after a refused one unsent", async function () {
    const { sent, provider } = node({ "0x02": "insufficient funds for gas * price + value" });
    const outcomes = await batchSenderOf(provider).sendBatch(sends("0x01", "0x02", "0x03"));
    expect(sent).to.deep.equal(["0x01", "0x02"]);
    expect(outcomes[0]).to.deep.equal({ result: "0xhash0x01" });
    expect("error" in outcomes[1]! && !(outcomes[1].error instanceof NotSentError)).to.equal(true);
    expect("error" in outcomes[2]! && outcomes[2].error instanceof NotSentError).to.equal(true);
  });

  it("goes on after 'already known': the node has that one", async function () {
    const { sent, provider } = node({ "0x01": "already known" });
    const outcomes = await batchSenderOf(provider).sendBatch(sends("0x01", "0x02"));
    expect(sent).to.deep.equal(["0x01", "0x02"]);
    expect(outcomes[1]).to.deep.equal({ result: "0xhash0x02" });
  });
});
