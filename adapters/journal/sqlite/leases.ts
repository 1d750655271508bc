/** The SQLite journal's leases (NonceLedger's acquireLease and releaseLease): who monitors a wallet. */
import type { DatabaseSync } from "node:sqlite";

import type { NonceLedger } from "../../../core/index.js";
import type { SqliteStore } from "./store.js";

/** Prepared once: the statements of the leases. */
function statements(db: DatabaseSync) {
  return {
    lease: db.prepare(
      `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE leases.holder = excluded.holder OR leases.expires_at < ?
       RETURNING holder`,
    ),
    unlease: db.prepare("DELETE FROM leases WHERE name = ? AND holder = ?"),
  };
}

export class SqliteLeases implements Pick<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #store: SqliteStore;
  readonly #sql: ReturnType<typeof statements>;

  constructor(store: SqliteStore) {
    this.#store = store;
    this.#sql = statements(store.db);
  }

  acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#store.write(() => {
      const now = Date.now();
      return this.#sql.lease.get(name, holder, now + ttlMs, now)?.holder === holder;
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.#store.write(() => {
      this.#sql.unlease.run(name, holder);
    });
  }
}
