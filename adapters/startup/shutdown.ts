/**
 * The shutdown step of the composition root: what each start step opened, closed last first.
 * A step that opens something pushes its closer at once, so a start that fails half-way closes
 * exactly what it had opened.
 */
import type { Logger } from "pino";

export class Shutdown {
  readonly #log: Logger;
  readonly #closers: Array<() => Promise<void>> = [];

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Closes `close` at shutdown, before whatever was pushed earlier. */
  push(close: () => Promise<void>): void {
    this.#closers.push(close);
  }

  /** Closes everything pushed, last first; an error is logged and the rest still close. */
  readonly run = async (): Promise<void> => {
    for (const close of this.#closers.splice(0).reverse()) {
      await close().catch((error: unknown) => this.#log.error({ err: error }, "error while closing"));
    }
  };
}
