import { AppError, Errors } from './errors.js'

/** SQLSTATE 53100: no space left on the store's disk (the log line says `the store is out of disk space`). */
export const DISK_FULL = '53100'

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
  return null
}

export function isPgError(err: unknown, code: string, constraint?: string): boolean {
  if (typeof err !== 'object' || err === null) return false
  const e = err as { code?: unknown; constraint?: unknown }
  return e.code === code && (constraint === undefined || e.constraint === constraint)
}

// A store that cannot be reached: the socket's errors, PostgreSQL's connection exceptions (class
// 08), a server shutting down or starting (57P01–57P03), no connection slot left (53300), and a
// new connection refused: the database is gone (dropped, renamed: 3D000) or the login no longer
// works (28000, 28P01). The log line says which.
const UNREACHABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
const UNREACHABLE_SQLSTATE = new Set(['57P01', '57P02', '57P03', '53300', '3D000', '28000', '28P01'])
// pg and pg-pool give these no code: a connection that broke, a pool that could not connect in time.
const UNREACHABLE_MESSAGE = /^(Connection terminated( unexpectedly| due to connection timeout)?|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)$/

/** Whether `err` says the store cannot be reached (not that a statement was wrong). */
export function isStoreUnreachable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  const { code, message } = err as { code?: unknown; message?: unknown }
  if (typeof code === 'string' && (UNREACHABLE_ERRNO.has(code) || UNREACHABLE_SQLSTATE.has(code) || code.startsWith('08'))) return true
  return typeof message === 'string' && UNREACHABLE_MESSAGE.test(message)
}
