/**
 * A TradePort for tests whose fake runs a whole trade in one function, as the port did before it
 * took its steps one at a time: `run(kind, order, hooks)` signs (calling `hooks.onSigned`, which
 * waits until the trade use case journalled it and asked to send it), may say it was submitted
 * (`hooks.onSubmitted`), and answers the receipt or throws. The steps are laid over it:
 * - prove and reserve take nothing (the fake refuses in `run`, which the use case hears at `sign`);
 * - sign answers the transaction `run` hands `onSigned`; a `run` that never calls it is given one
 *   made from its receipt (a fake that does not model signing);
 * - send opens the way, and answers once `run` said submitted, or ended;
 * - settle answers what `run` ended with.
 */
import type {
  ProvenTrade,
  ReservedTrade,
  SentTrade,
  SignedTrade,
  SignedTradeTx,
  TradeKind,
  TradeOnChain,
  TradeOrder,
  TradePort,
  TradeResolution,
  TransactionReceipt,
} from "../../core/index.js";

/** What `run` is given: the points where the trade use case meets it. */
export interface WholeTradeHooks {
  /** The transaction signed: resolves once the use case journalled it and sends it; rejects if it abandons it. */
  onSigned(tx: SignedTradeTx): Promise<void>;
  /** A node holds it, not mined yet. */
  onSubmitted(): void;
}

interface Run {
  result: Promise<TransactionReceipt>;
  submitted: Promise<boolean>;
  gate?: { resolve: () => void; reject: (error: unknown) => void };
}

interface Signed extends SignedTrade {
  run: Run;
}

interface Sent extends SentTrade {
  run: Run;
}

export abstract class WholeTradePort implements TradePort {
  /** The receipts of the trades `run` mined, by transaction hash. */
  readonly #mined = new Map<string, TransactionReceipt>();
  /** Transactions made for a `run` that does not model signing: each a nonce of its own. */
  #made = 0;

  /** The whole trade: sign (hooks.onSigned), maybe submitted, then the receipt, or a refusal. */
  protected abstract run(kind: TradeKind, order: TradeOrder, hooks: WholeTradeHooks): Promise<TransactionReceipt>;
  abstract resolve(trade: TradeOnChain): Promise<TradeResolution>;

  /** What a fake's own trades resolve to: mined and confirmed, with the receipt `run` answered; undefined for others. */
  protected minedResolution(trade: TradeOnChain): TradeResolution | undefined {
    const receipt = trade.broadcasts.map((b) => this.#mined.get(b.hash.toLowerCase())).find((r) => r !== undefined);
    return receipt === undefined ? undefined : { state: "mined", receipt, confirmations: 1, confirmed: true };
  }

  blockTimeMs(): number | undefined {
    return undefined;
  }

  async prove(order: TradeOrder): Promise<ProvenTrade> {
    return { order, output: 0n };
  }

  async reserve(proven: ProvenTrade): Promise<ReservedTrade> {
    return { proven };
  }

  sign(reserved: ReservedTrade): Promise<Signed> {
    const { order } = reserved.proven;
    return new Promise<Signed>((resolveSigned, rejectSigned) => {
      let signed = false;
      let submit: (yes: boolean) => void = () => {};
      const run: Run = {
        result: Promise.resolve() as unknown as Promise<TransactionReceipt>,
        submitted: new Promise<boolean>((resolve) => (submit = resolve)),
      };
      run.result = this.run(order.kind, order, {
        onSigned: (tx) =>
          new Promise<void>((resolve, reject) => {
            signed = true;
            run.gate = { resolve, reject };
            resolveSigned({ tx, run });
          }),
        onSubmitted: () => submit(true),
      });
      run.result.then(
        (receipt) => {
          this.#mined.set(receipt.transactionHash.toLowerCase(), receipt);
          submit(false);
          if (!signed) resolveSigned({ tx: txOf(order, receipt, ++this.#made), run });
        },
        (error: unknown) => {
          submit(false);
          if (!signed) rejectSigned(error);
        },
      );
    });
  }

  async send(trade: SignedTrade): Promise<Sent> {
    const { tx, run } = trade as Signed;
    run.gate?.resolve();
    const submitted = await run.submitted;
    // Ended before saying it was submitted: a refusal after signing is the send's.
    if (!submitted) await run.result;
    return { tx, submitted, run };
  }

  abandon(trade: SignedTrade, error: unknown): void {
    (trade as Signed).run.gate?.reject(error);
    (trade as Signed).run.result.catch(() => {});
  }

  settle(trade: SentTrade): Promise<TransactionReceipt> {
    return (trade as Sent).run.result;
  }

  release(): void {}
}

/** The transaction of a fake that does not model signing: its receipt's hash, the nonce it is given. */
function txOf(order: TradeOrder, receipt: TransactionReceipt, nonce: number): SignedTradeTx {
  return {
    wallet: order.wallet,
    nonce,
    txHash: receipt.transactionHash,
    rawTx: "0x02",
    maxFeePerGas: 2n,
    maxPriorityFeePerGas: 1n,
    deadline: 1_900_000_000,
  };
}
