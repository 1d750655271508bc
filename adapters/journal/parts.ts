/**
 * How a journal is put together from its parts. Each storage (memory/, sqlite/, postgres/) has
 * one class per port it implements (trades.ts, nonces.ts, leases.ts, quotes.ts, webhooks.ts),
 * all over the one storage they share (store.ts), and a journal class (index.ts) that holds one
 * of each in `parts`. The composition root wants one object that implements every port: rather
 * than a forwarding method written out for each of the ports' thirty-odd methods,
 * `delegateToParts` gives the journal class a method for each method of its parts, which calls
 * that part's.
 *
 * They are put on the class's prototype, not on each instance, so that a subclass can still
 * override one and call `super` (the tests' journals that fail on cue do).
 */
import type { NonceLedger, NonceStore, QuoteStore, TradeJournal, WebhookOutbox } from "../../core/index.js";

/** Every port a journal implements. */
export type JournalPorts = TradeJournal & NonceStore & NonceLedger & QuoteStore & WebhookOutbox;

/** A class, whatever its constructor takes. */
type Class = abstract new (...args: never[]) => object;

/** The type of a journal's `parts`, given the classes of its parts by name. */
export type PartsOf<T extends Record<string, Class>> = { [K in keyof T]: InstanceType<T[K]> };

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/**
 * `true` only when the parts' methods together implement every port but `close` (the journal's
 * own: it closes the storage all parts share): a journal states `true satisfies CoversPorts<Parts>`,
 * so a port method no part has is a compile error, not a TypeError at run time.
 */
export type CoversPorts<P extends Record<string, object>> =
  UnionToIntersection<P[keyof P]> extends Omit<JournalPorts, "close"> ? true : never;

/** What a delegated method finds on the journal: its parts, by the names given to `delegateToParts`. */
interface WithParts {
  readonly parts: Record<string, Record<string, (...args: unknown[]) => unknown>>;
}

/**
 * Defines on `journal.prototype`, for each public method of each part's class, a method of the
 * same name that calls it on the instance's `parts[key]`. A name that the journal class or
 * another part already has is refused when the module loads, so no method silently hides another.
 */
export function delegateToParts(journal: Class, parts: Record<string, Class>): void {
  for (const [key, part] of Object.entries(parts)) {
    for (const name of Object.getOwnPropertyNames(part.prototype)) {
      const descriptor = Object.getOwnPropertyDescriptor(part.prototype, name);
      if (name === "constructor" || typeof descriptor?.value !== "function") continue;
      if (name in journal.prototype)
        throw new Error(`${journal.name}.${name} is defined twice (its ${key} part has it)`);
      // Named as the part's method, so that a stack trace reads as before.
      const delegated = {
        [name](this: WithParts, ...args: unknown[]): unknown {
          return this.parts[key]![name]!(...args);
        },
      }[name];
      Object.defineProperty(journal.prototype, name, { configurable: true, writable: true, value: delegated });
    }
  }
}
