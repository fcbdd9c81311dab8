import { postgresTarget, type Config } from './core/config.js'
import { openDb, reachPostgres, type Db } from './store/db.js'
import { migrate } from './store/migrate.js'
import { isStoreUnreachable } from './store/unreachable.js'
import { isPgError, READ_ONLY } from './core/pg-errors.js'

/*
 * Opening the store as the commands do, in a module of its own: `kbis apply`, `keys` and `users`
 * open the store without the server (loading server.ts, with the app and every route, took
 * ≈ 0.9 s of each such command).
 */

export interface OpenStoreOptions {
  /** Called with the directory before a new PGlite data directory is made. */
  onInitialize?: (dir: string) => void
  /** Called with the migrations the opening applied, when it applied any. */
  onMigrated?: (applied: string[]) => void
  /** Refuse a PostgreSQL database or a PGlite directory that holds no kbis store, rather than set one up (keys, users). */
  existingOnly?: boolean
  /** PGlite: as openDb's, once the directory is locked. */
  whenLocked?: (dir: string) => Promise<void>
  /** PGlite: as openDb's, when PGlite starts booting in its thread. */
  onBooting?: () => void
}

/**
 * Opens the configured store (PGlite or PostgreSQL) and migrates it; `onInitialize` as openDb's,
 * `onMigrated` with the migrations this call applied (none when the store was current).
 */
export async function openStore(config: Config, { onInitialize, onMigrated, existingOnly = false, whenLocked, onBooting }: OpenStoreOptions = {}): Promise<Db> {
  const answerTimeoutMs = config.databaseUrl && config.statementTimeoutMs > 0 ? config.statementTimeoutMs + PRIMARY_ANSWER_MARGIN_MS : undefined
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, sharedBuffersMb: config.pgliteSharedBuffersMb, poolSize: config.poolSize,
    statementTimeoutMs: config.statementTimeoutMs, answerTimeoutMs, connectTimeoutMs: config.databaseUrl ? config.connectTimeoutMs : undefined, parallelSetupCost: config.pgParallelSetupCost, onInitialize, existingOnly, whenLocked, onBooting })
  // Whatever keeps the first connection from opening (an address, a login, SSL) is PostgreSQL's to name.
  let reached = false
  try {
    if (config.databaseUrl) await reachPostgres(config.databaseUrl, config.connectTimeoutMs)
    reached = true
    if (existingOnly && config.databaseUrl && !(await holdsKbis(db))) {
      throw new NotSetUpError(`PostgreSQL at ${postgresTarget(config.databaseUrl)} (DATABASE_URL) holds no kbis store (kbis serve or kbis apply sets one up); nothing was written`)
    }
    const applied = answerTimeoutMs === undefined ? await migrate(db) : await migrateApart(config)
    if (applied.length > 0) onMigrated?.(applied)
  } catch (err) {
    await db.close().catch(() => undefined)
    // The first statement is where an unreachable or refusing PostgreSQL shows: say which one.
    if (err instanceof NotSetUpError) throw err
    if (config.databaseUrl && (!reached || isConnectionError(err) || isStoreUnreachable(err) || isMissingSchema(err) || isReadOnly(err))) {
      const hint = isMissingSchema(err) ? ' (the search_path of DATABASE_URL names no schema that exists: create it first, or leave search_path out)'
        : isReadOnly(err) ? ' (the database is read-only: DATABASE_URL must name a primary that takes writes, not a standby, and without default_transaction_read_only)' : ''
      throw new Error(`cannot use PostgreSQL at ${postgresTarget(config.databaseUrl)} (DATABASE_URL): ${(err as Error).message}${hint}`)
    }
    throw err
  }
  return db
}

/**
 * A statement on PostgreSQL without an answer this long after the statement timeout fails on the
 * client's side ("Query read timeout": 503 service_unavailable, the connection dropped). A server
 * that stopped answering (a frozen machine, a network that drops packets without a reset) cannot
 * fire its own `statement_timeout`, and requests waited for as long as their clients did. Twice
 * the replica's margin: a read the replica did not answer goes to the primary, a write that fails
 * here fails.
 */
export const PRIMARY_ANSWER_MARGIN_MS = 2_000

/**
 * The migrations on a connection of their own, without the answer timeout: a migration (an index
 * built over a large table) and the wait for another process's run past the statement timeout
 * (migrate() lifts it for them).
 */
async function migrateApart(config: Config): Promise<string[]> {
  const db = await openDb({ databaseUrl: config.databaseUrl, poolSize: 1, statementTimeoutMs: config.statementTimeoutMs, parallelSetupCost: config.pgParallelSetupCost })
  try {
    return await migrate(db)
  } finally {
    await db.close()
  }
}

/** A command that works on an existing store was pointed at a database without one. */
class NotSetUpError extends Error {}

/** Whether the database (its schema on the search path) holds kbis's tables: its migrations' register. */
async function holdsKbis(db: Db): Promise<boolean> {
  const found = await db.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
  return found.rows[0]!.present
}

/** Errors of reaching or logging in to PostgreSQL (socket errors, SQLSTATE classes 08 and 28, a missing database); isStoreUnreachable: also a connection that broke (pg gives it no code). */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  if (typeof code !== 'string') return false
  return code.startsWith('E') || code.startsWith('08') || code.startsWith('28') || code === '3D000'
}

/** SQLSTATE 3F000: the search path names no schema that exists ("no schema has been selected to create in"). */
function isMissingSchema(err: unknown): boolean {
  return (err as { code?: unknown }).code === '3F000'
}

/** 25006 read_only_sql_transaction: the migrations' first statement on a standby or a read-only database. */
function isReadOnly(err: unknown): boolean {
  return isPgError(err, READ_ONLY)
}

/**
 * What a starting server says of the migrations it applied (an upgrade, a new PostgreSQL database;
 * a new PGlite directory is made from a template already migrated): which, so that an operator
 * sees the schema move. Up to five by name, more as a range.
 */
export function migratedLine(applied: readonly string[]): string {
  const named = applied.length <= 5 ? applied.join(', ') : `${applied[0]} … ${applied[applied.length - 1]}`
  return `kbis: applied ${applied.length} schema migration${applied.length === 1 ? '' : 's'} (${named})`
}

/** What the commands say on stderr before a new PGlite data directory is created (a second or two). */
export function announceInitialize(dir: string): void {
  process.stderr.write(`kbis: creating the PGlite data directory ${dir}\n`)
}
