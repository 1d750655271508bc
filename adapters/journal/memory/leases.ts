/** The memory journal's leases (NonceLedger's acquireLease and releaseLease): who monitors a wallet. */
import type { NonceLedger } from "../../../core/index.js";

export class MemoryLeases implements Pick<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #leases = new Map<string, { holder: string; expiresAt: number }>();

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = Date.now();
    const lease = this.#leases.get(name);
    if (lease !== undefined && lease.holder !== holder && lease.expiresAt > now) return false;
    this.#leases.set(name, { holder, expiresAt: now + ttlMs });
    return true;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    if (this.#leases.get(name)?.holder === holder) this.#leases.delete(name);
  }
}
