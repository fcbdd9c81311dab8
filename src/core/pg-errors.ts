import { AppError, Errors } from './errors.js'

/** SQLSTATE 53100: no space left on the store's disk (the log line says `the store is out of disk space`). */
export const DISK_FULL = '53100'

/**
 * SQLSTATE 25006: the database takes no writes (a standby that DATABASE_URL names after a failover,
 * `default_transaction_read_only`, a provider's read-only mode); the log line says `the database is read-only`.
 */
export const READ_ONLY = '25006'

/**
 * The one place that reads SQLSTATEs. Maps by constraint name, never by message text; PGlite
 * raises the same SQLSTATEs and constraint names as PostgreSQL.
 */
export function mapPgError(err: unknown): AppError | null {
  if (typeof err !== 'object' || err === null) return null
  const { code, constraint } = err as { code?: unknown; constraint?: unknown }
  if (typeof code !== 'string') return null
  if (code === '23505' && constraint === 'assets_unique_prop') {
    return new AppError(Errors.UNIQUE_VIOLATION, 'the unique key value is already taken by another asset of this type')
  }
  if (code === '23505' && constraint === 'relationships_unique') {
    return new AppError(Errors.DUPLICATE_RELATIONSHIP, 'a relationship of this type between these assets exists already')
  }
  // 57014 query_canceled: the statement ran past statement_timeout (KBIS_STATEMENT_TIMEOUT_MS).
  if (code === '57014') {
    return new AppError(Errors.QUERY_TIMEOUT, "the query ran longer than the server's statement timeout; narrow the filter (fewer or shorter conditions) or retry later")
  }
  // 40001 serialization failure / 40P01 deadlock: the client may retry.
  if (code === '40001' || code === '40P01') {
    return new AppError(Errors.SERVICE_UNAVAILABLE, 'a concurrent write conflicted with this request; retry it', { 'Retry-After': '1' })
  }
  // 53100 disk_full: the store could not extend a file ("No space left on device"). The statement
  // failed and its transaction wrote nothing; the store goes on serving reads and takes writes
  // again once the operator frees space (measured on PGlite: no restart needed). Not the
  // request's fault, nor a fault of the server's code: a client may retry later.
  if (code === DISK_FULL) {
    return new AppError(Errors.SERVICE_UNAVAILABLE, "the server's store is out of disk space and wrote nothing; retry later", { 'Retry-After': '30' })
  }
  // 25006 read_only_sql_transaction: nothing of the request was written; the operator is told in
  // the log. Reads write too (the rate limit's counters on PostgreSQL), so every request lands here.
  if (code === READ_ONLY) {
    return new AppError(Errors.SERVICE_UNAVAILABLE, "the server's database is read-only and wrote nothing; retry later", { 'Retry-After': '30' })
  }
  // 55P03 lock_not_available: a lock_timeout the database or role sets (kbis sets none) ran out
  // while another transaction held a row or table this request needed. Nothing was written.
  if (code === '55P03') {
    return new AppError(Errors.SERVICE_UNAVAILABLE, 'a concurrent write held what this request needed for longer than the database lets it wait; retry it', { 'Retry-After': '1' })
  }
  return null
}

export function isPgError(err: unknown, code: string, constraint?: string): boolean {
  if (typeof err !== 'object' || err === null) return false
  const e = err as { code?: unknown; constraint?: unknown }
  return e.code === code && (constraint === undefined || e.constraint === constraint)
}
