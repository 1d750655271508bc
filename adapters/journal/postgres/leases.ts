/**
 * The PostgreSQL journal's leases (NonceLedger's acquireLease and releaseLease): who monitors a
 * wallet, and which instances are alive (PostgresJournal.keepAlive).
 */
import type pg from "pg";

import type { NonceLedger } from "../../../core/index.js";

export class PostgresLeases implements Pick<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    // The database's clock decides, so instances whose clocks differ still agree.
    const { rows } = await this.#pool.query<{ holder: string }>(
      `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3 / 1000.0))
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE leases.holder = excluded.holder OR leases.expires_at < clock_timestamp()
       RETURNING holder`,
      [name, holder, ttlMs],
    );
    return rows[0]?.holder === holder;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    await this.#pool.query("DELETE FROM leases WHERE name = $1 AND holder = $2", [name, holder]);
  }
}
