/**
 * What the PostgreSQL journal's parts share: its two pools, and a transaction on one pooled
 * connection, for a write that spans several tables (a trade and its nonce slot) so that it is
 * one write.
 */
import pg from "pg";

/** `pool` for reads and writes; `lockPool` for the connections that hold wallets' nonce locks (nonces.ts). */
export interface PostgresPools {
  pool: pg.Pool;
  lockPool: pg.Pool;
}

/** The pools of a journal, with `max` and `nonceConnections` connections (PostgresJournalOptions). */
export function openPools(url: string, options: { max?: number; nonceConnections?: number }): PostgresPools {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10 });
  const lockPool = new pg.Pool({ connectionString: url, max: options.nonceConnections ?? 4 });
  lockPool.on("connect", (client) => {
    // Queued before any query of the caller that asked for this connection. A long `send` holds its
    // transaction open, so no server-wide idle-in-transaction timeout may cut it; and server-side
    // keepalives make the server notice within ~60 s that this host vanished, and drop its locks.
    client
      .query(
        `SET idle_in_transaction_session_timeout = 0; SET tcp_keepalives_idle = 30;
         SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3`,
      )
      .catch(() => {}); // a connection that fails here fails the caller's next query too
  });
  // An idle connection that breaks (server restart, network) is dropped by the pool and the next
  // query reports the failure; without a listener the 'error' event would crash the process.
  pool.on("error", () => {});
  lockPool.on("error", () => {});
  return { pool, lockPool };
}

/** Runs `work` in one transaction on one pooled connection of `pool`. */
export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    client.release();
    return result;
  } catch (error) {
    const rolledBack = await client.query("ROLLBACK").then(
      () => true,
      () => false,
    );
    client.release(!rolledBack);
    throw error;
  }
}
