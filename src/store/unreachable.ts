/**
 * Whether an error of the store says it cannot be reached (a request may retry later: 503), not
 * that a statement was wrong. Here, at the bottom, because the store marks the errors of opening
 * a connection (postgres-db.ts) and the read replica falls back on them (replica.ts).
 */

// A store that cannot be reached: the socket's errors, PostgreSQL's connection exceptions (class
// 08), a server shutting down or starting or a database dropped (57P01–57P04), no connection slot
// left (53300), and a new connection refused: the database is gone (dropped, renamed: 3D000) or
// the login no longer works (28000, 28P01) — and any other error of opening a connection
// (markConnectFailure). The log line says which.
const UNREACHABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
const UNREACHABLE_SQLSTATE = new Set(['57P01', '57P02', '57P03', '57P04', '53300', '3D000', '28000', '28P01'])
// pg and pg-pool give these no code: a connection that broke, a pool that could not connect in time,
// a statement whose answer did not come in time (StoreOptions.answerTimeoutMs).
const UNREACHABLE_MESSAGE = /^(Connection terminated( unexpectedly| due to connection timeout)?|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable|Query read timeout)$/

/** Set on an error raised while a new connection was being opened (markConnectFailure). */
const CONNECT_FAILURE = Symbol('kbis.connectFailure')

/**
 * Marks `err` as raised while opening a connection: whatever its SQLSTATE, the store refused or
 * could not take a new connection (a database not accepting connections, 55000, as
 * `ALTER DATABASE … ALLOW_CONNECTIONS false` makes it; one in recovery; a login that stopped
 * working), so no statement of the request was wrong. Returns it, to be thrown.
 */
export function markConnectFailure(err: unknown): unknown {
  if (typeof err === 'object' && err !== null) Object.defineProperty(err, CONNECT_FAILURE, { value: true })
  return err
}

/** Whether `err` says the store cannot be reached (not that a statement was wrong). */
export function isStoreUnreachable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  if ((err as { [CONNECT_FAILURE]?: boolean })[CONNECT_FAILURE] === true) return true
  const { code, message } = err as { code?: unknown; message?: unknown }
  if (typeof code === 'string' && (UNREACHABLE_ERRNO.has(code) || UNREACHABLE_SQLSTATE.has(code) || code.startsWith('08'))) return true
  return typeof message === 'string' && UNREACHABLE_MESSAGE.test(message)
}
