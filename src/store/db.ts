/*
 * Opens the store: PostgreSQL when a connection string is given, else embedded PGlite. What a
 * store is lives in store/db-api.ts; the backends in store/postgres-db.ts and store/pglite-db.ts.
 * Nothing above store/ knows which backend it has.
 */
import type { Db, StoreOptions } from './db-api.js'
import { openPostgres } from './postgres-db.js'
import { openPglite } from './pglite-db.js'

export * from './db-api.js'
export { PREPARED_PER_CONNECTION, reachPostgres } from './postgres-db.js'
export { DEFAULT_PG_PARALLEL_SETUP_COST, DEFAULT_PGLITE_SHARED_BUFFERS_MB, PGLITE_MAINTENANCE_WORK_MEM_MB } from './tuning.js'

export async function openDb(options: StoreOptions): Promise<Db> {
  return options.databaseUrl ? openPostgres({ ...options, databaseUrl: options.databaseUrl }) : openPglite(options)
}
