/*
 * Opens the store: PostgreSQL when a connection string is given, else embedded PGlite. What a
 * store is lives in store/db-api.ts; the backends in store/postgres-db.ts and store/pglite-db.ts.
 * Nothing above store/ knows which backend it has.
 */
import type { Db, StoreOptions } from './db-api.js'
import { openPglite } from './pglite-db.js'

export * from './db-api.js'
export { DEFAULT_PG_PARALLEL_SETUP_COST, DEFAULT_PGLITE_SHARED_BUFFERS_MB, PGLITE_MAINTENANCE_WORK_MEM_MB } from './tuning.js'

// The PostgreSQL backend (and pg with it, ≈ 50 ms of a start) is loaded by a process that opens PostgreSQL.
const postgres = () => import('./postgres-db.js')

export async function openDb(options: StoreOptions): Promise<Db> {
  return options.databaseUrl ? (await postgres()).openPostgres({ ...options, databaseUrl: options.databaseUrl }) : openPglite(options)
}

/** Connects to `databaseUrl` once, to say early and in one line why it cannot be reached (postgres-db.ts). */
export async function reachPostgres(databaseUrl: string, timeoutMs: number): Promise<void> {
  return (await postgres()).reachPostgres(databaseUrl, timeoutMs)
}
