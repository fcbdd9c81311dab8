import { createHash, randomUUID } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Db } from '../store/db.js'
import { AppError, Errors, errorBody } from '../core/errors.js'
import { claimKey, completeKey, dropUnfinishedClaims, markWritten, purgeExpiredKeys, readKey, refreshClaims, releaseKey, type KeyScope } from './sql.js'
import { openAnswer, sealAnswer } from './seal.js'
import { bearerToken } from '../core/auth/authenticate.js'
import { WRITE_METHODS } from '../core/writes.js'
import { setAsideDigest } from '../core/http-input.js'
import { FIRST_ROUND_AFTER_MS, scheduleRounds } from '../core/rounds.js'
import { answerOwed, markWrites } from '../core/cut-off.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's valid Idempotency-Key header, for services and events (RequestContext). */
    idempotencyKey: string | undefined
  }
}

/** CONTRACT §16: responses are kept 24 h. */
export const IDEMPOTENCY_TTL_SECONDS = 24 * 60 * 60
// Every process moves the claims it holds to now this often (their heartbeat); a claim not moved
// for STALE_CLAIM_SECONDS belongs to a process that died, and another request may take the key
// over. Before the heartbeat a dead process's claim held its key for 10 minutes: longer than any
// client's retries, so a chunk sent again after a server's crash was refused as "still running".
const CLAIM_REFRESH_MS = 5_000
const STALE_CLAIM_SECONDS = 30
const PURGE_EVERY_MS = 15 * 60_000
// 1–255 visible ASCII characters (0x21–0x7E).
const VALID_KEY = /^[\x21-\x7e]{1,255}$/
// Headers that describe the stored body; per-request ones (X-Request-Id, rate-limit counters) are not replayed.
const REPLAYED_HEADERS = ['content-type', 'location']

interface Claim {
  id: string
  scope: KeyScope
  done: boolean
  fingerprint: string
  /** What the stored answer is sealed under (seal.ts): the scope, as text. */
  sealScope: string
  /** Its entry in the app's running claims. */
  running?: RunningClaim
}

/** The scope as the seal's context: the same API key reading its own key's answer. */
const sealScopeOf = (scope: KeyScope): string => JSON.stringify([scope.orgId, scope.apiKeyId, scope.method, scope.path, scope.key])

/** The request's API key (authenticated before this runs, so present). */
const tokenOf = (request: FastifyRequest): string => bearerToken(request) ?? ''

const claims = new WeakMap<FastifyRequest, Claim>()

/** A claim this app is asking the store for, or holds: `claimed` tells which once the store answered. */
interface RunningClaim {
  id: string
  scope: KeyScope
  fingerprint: string
  claimed: Promise<boolean>
}

/**
 * The claims this app asks for or holds now (one per scope; one set per app). A repeat that
 * arrives while its first request runs here is answered at once, without waiting for the store:
 * on PGlite, whose one connection the first request's transaction holds, the repeat's claim would
 * wait for that transaction and then find the answer stored, instead of the 409 that CONTRACT §16
 * gives a repeat "while the first is still running". A claim still being asked for is waited for:
 * a repeat of a request that has answered already asks too, finds the stored answer and replays
 * it, and so does every repeat sent at once with it. Claims of other processes are found in the store.
 */
export class RunningClaims {
  private readonly claims = new Map<string, RunningClaim>()
  /** Requests let past the organization's turn as repeats (see {@link repeatsRunning}). */
  readonly repeats = new WeakSet<FastifyRequest>()

  get(sealScope: string): RunningClaim | undefined {
    return this.claims.get(sealScope)
  }

  set(sealScope: string, claim: RunningClaim): void {
    this.claims.set(sealScope, claim)
  }

  /** The claims asked for or held now (their heartbeat, refreshClaims). */
  held(): RunningClaim[] {
    return [...this.claims.values()]
  }

  /** Forgets `claim` (not another request's, asking for the same scope since). */
  delete(sealScope: string, claim: RunningClaim): void {
    if (this.claims.get(sealScope) === claim) this.claims.delete(sealScope)
  }

  /**
   * Whether this authenticated request repeats the Idempotency-Key of a request running here: it
   * will be answered 409 or 422, or replayed, from the store without running the route, so it
   * need not wait for the organization's turn (org-concurrency.ts), behind the very request it repeats.
   */
  repeatsRunning(request: FastifyRequest): boolean {
    if (this.claims.size === 0 || !WRITE_METHODS.has(request.method)) return false
    const raw = request.headers['idempotency-key']
    if (typeof raw !== 'string' || !VALID_KEY.test(raw)) return false
    if (!this.claims.has(sealScopeOf(scopeOf(request, raw)))) return false
    this.repeats.add(request)
    return true
  }
}

type Running = RunningClaims

function release(running: Running, claim: Claim): void {
  if (claim.running) running.delete(claim.sealScope, claim.running)
}

function headerKey(request: FastifyRequest): string | undefined {
  const raw = request.headers['idempotency-key']
  if (raw === undefined) return undefined
  if (Array.isArray(raw) || !VALID_KEY.test(raw)) {
    throw new AppError(Errors.INVALID_REQUEST, [{ detail: 'Idempotency-Key must be 1 to 255 visible ASCII characters, sent once' }])
  }
  return raw
}

function scopeOf(request: FastifyRequest, key: string): KeyScope {
  return { orgId: request.auth.orgId, apiKeyId: request.auth.keyId, method: request.method, path: resourcePath(request), key }
}

/**
 * The path of a key's scope: the route with its parameters as the route reads them. Spellings of
 * one path name one request: a trailing slash (which the router ignores) and percent-encoding
 * (`/assets/server%3Ahostname%3Aweb-01` is `/assets/server:hostname:web-01`) ran it once each. Only
 * `%`, `/`, `?` and `#` in a parameter are written encoded, so the usual spelling is kept as is.
 */
function resourcePath(request: FastifyRequest): string {
  const route = request.routeOptions.url
  if (route === undefined) return request.url.split('?')[0] ?? request.url
  const params = request.params as Record<string, string | undefined>
  return route.replace(/:(\w+)/g, (_, name: string) => (params[name] ?? '').replace(/[%/?#]/g, encodeURIComponent))
}

function queryOf(request: FastifyRequest): string {
  return request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : ''
}

/**
 * How long a repeat waits for the store to tell whether the request of its key asking before it
 * (in this app) claimed the key: a repeat of a request that has answered already asks too, and
 * so do the repeats sent at once with it; each replays the stored answer. A store that takes
 * longer is busy with other writes (PGlite's one connection): the request asking may be the first
 * one, and the repeat is answered 409 at once rather than after those writes.
 */
const CLAIM_WAIT_MS = 250

/** Whether `claim` was claimed, or undefined when the store has not said within `ms`. */
async function claimedWithin(claim: RunningClaim, ms: number): Promise<boolean | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<undefined>((resolve) => { timer = setTimeout(() => resolve(undefined), ms) })
  try {
    return await Promise.race([claim.claimed, late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * What "the same request" means: method, path, query string and the parsed body (with the bytes'
 * digest when the parser set items of it aside: they are null in the parsed body). The body is
 * compared as the JSON it is: its spacing and the order of an object's members do not count (a
 * client that builds the retry's body anew may write its members in another order), the order of
 * an array's items does.
 */
function fingerprintOf(request: FastifyRequest, members: 'by name' | 'as sent' = 'by name'): string {
  const digest = setAsideDigest(request)
  const body = JSON.stringify(request.body ?? null, members === 'by name' ? membersInOrder : undefined)
  return createHash('sha256')
    .update(`${request.method}\n${resourcePath(request)}\n${queryOf(request)}\n${body}${digest === undefined ? '' : `\n${digest}`}`)
    .digest('hex')
}

/**
 * Whether a stored fingerprint is this request's. Keys claimed before 3bfe1b0 (2026-11-30) hold a
 * fingerprint of the body's members as they were sent: a store upgraded from such a version keeps
 * them up to 24 hours, and their identical repeat still gets its replay (an upgrade probe saw 422
 * idempotency_key_reused instead). Only a mismatch pays for the second digest.
 */
function sameRequest(stored: string, fingerprint: string, request: FastifyRequest): boolean {
  return stored === fingerprint || stored === fingerprintOf(request, 'as sent')
}

/**
 * A JSON.stringify replacer that writes every object's members in the order of their names (an
 * object already in that order, as most small ones are not, is written as it is). About 30 ms
 * for a 10,000-item bulk, against 8 for the body as it came.
 */
function membersInOrder(this: unknown, _key: string, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const names = Object.keys(value)
  let ordered = true
  for (let i = 1; i < names.length && ordered; i++) ordered = names[i - 1]! < names[i]!
  if (ordered) return value
  const copy: Record<string, unknown> = {}
  for (const name of names.sort()) copy[name] = (value as Record<string, unknown>)[name]
  return copy
}

/**
 * Claims the key or answers from it. Runs after authentication (the scope needs the API key) and
 * after the body is parsed (the fingerprint needs it), before the route validates anything, so
 * every completed answer of the route, refusals included, is what a repeat gets.
 */
async function beforeWrite(db: Db, running: Running, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
  if (!WRITE_METHODS.has(request.method)) return undefined
  bodyRead.add(request)
  const key = headerKey(request)
  if (key === undefined) return undefined
  const scope = scopeOf(request, key)
  const fingerprint = fingerprintOf(request)
  const sealScope = sealScopeOf(scope)
  const first = running.get(sealScope)
  if (first !== undefined && (await claimedWithin(first, CLAIM_WAIT_MS)) !== false) throw first.fingerprint === fingerprint ? stillRunning() : reused()
  // A repeat let past the organization's turn holds no turn to run with: it answers what its
  // first request stored, or tells the client to retry.
  if (running.repeats.has(request)) {
    const replayed = await replayStored(db, scope, fingerprint, request, reply)
    return replayed === null || replayed === 'gone' ? throwStillRunning() : replayed
  }
  // A few tries: the row of a lost claim may vanish (its request answered 5xx) before it is read.
  for (let attempt = 0; attempt < 3; attempt++) {
    const claim: Claim = { id: randomUUID(), scope, done: false, fingerprint, sealScope }
    // Entered before the store is asked: a repeat arriving meanwhile waits for the answer and,
    // if this request claimed the key, is answered 409 at once.
    const asking = claimKey(db, scope, { id: claim.id, fingerprint, ttlSeconds: IDEMPOTENCY_TTL_SECONDS, staleSeconds: STALE_CLAIM_SECONDS })
    claim.running = { id: claim.id, scope, fingerprint, claimed: asking.catch(() => false) }
    running.set(sealScope, claim.running)
    let claimed = false
    try {
      claimed = await asking
    } finally {
      if (!claimed) release(running, claim)
    }
    if (claimed) {
      claims.set(request, claim)
      markWrites(request, (tx) => markWritten(tx, scope, claim.id))
      request.idempotencyKey = key
      return undefined
    }
    const replayed = await replayStored(db, scope, fingerprint, request, reply)
    if (replayed === 'gone') continue
    return replayed ?? throwStillRunning()
  }
  throw new AppError(Errors.IDEMPOTENCY_KEY_IN_USE, [{ detail: 'the request with this Idempotency-Key is changing state; retry' }], RETRY_SOON)
}

/**
 * Answers a repeat from the store: the stored answer, replayed byte for byte; 422 for another
 * body; null while the first request runs; 'gone' when no request holds the key.
 */
async function replayStored(db: Db, scope: KeyScope, fingerprint: string, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | null | 'gone'> {
  const stored = await readKey(db, scope, STALE_CLAIM_SECONDS)
  if (stored === null) return 'gone'
  if (!sameRequest(stored.fingerprint, fingerprint, request)) throw reused()
  if (stored.lost) throw answerLost()
  if (stored.status === null) return null
  const body = openAnswer(tokenOf(request), sealScopeOf(scope), stored.body ?? '')
  // Only the API key that wrote the answer reads this row (the scope holds its id), and a key's
  // secret never changes: an answer that does not open is a fault of the store, not the client's.
  if (body === null) throw new Error('a stored idempotent answer could not be opened with the API key of its scope')
  for (const [name, value] of Object.entries(stored.headers ?? {})) reply.header(name, value)
  reply.header('idempotent-replayed', 'true').code(stored.status)
  return reply.send(body === '' ? undefined : body)
}

const reused = (): AppError => new AppError(Errors.IDEMPOTENCY_KEY_REUSED, [{ detail: 'this Idempotency-Key was used for another request (another body or query string) to this method and path in the last 24 hours' }])
/**
 * A repeat while the first request runs is to be sent again (Retry-After); one whose first request
 * wrote its changes and lost its answer gets the same code without it: sending it again changes
 * nothing (`kbis import` tells the two apart by it).
 */
const RETRY_SOON = { 'Retry-After': '1' }
const stillRunning = (): AppError => new AppError(Errors.IDEMPOTENCY_KEY_IN_USE, [{ detail: 'the first request with this Idempotency-Key is still running; retry when it has answered' }], RETRY_SOON)
const answerLost = (): AppError => new AppError(Errors.IDEMPOTENCY_KEY_IN_USE, [{ detail: 'the first request with this Idempotency-Key wrote its changes, but its server stopped before it could keep the answer: '
  + 'the request is not run again (that would write them twice), and this key answers so until it expires, 24 hours after its first use; read the current state instead' }])
const throwStillRunning = (): never => {
  throw stillRunning()
}

/** Stores the answer of the request holding a claim, or gives the claim back on 5xx and 429. */
async function afterWrite(db: Db, running: Running, request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<void> {
  const claim = claims.get(request)
  if (!claim || claim.done) return
  claim.done = true
  const status = reply.statusCode
  const body = payload === undefined || payload === null ? '' : typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : null
  try {
    if (status >= 500 || status === 429 || body === null) return await releaseKey(db, claim.scope, claim.id)
    await completeKey(db, claim.scope, claim.id, { status, headers: replayedHeaders(reply), body: sealAnswer(tokenOf(request), claim.sealScope, body) })
  } finally {
    // Once the answer is stored (or the claim given back), a repeat reads the store.
    release(running, claim)
  }
}

function replayedHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const name of REPLAYED_HEADERS) {
    const value = reply.getHeader(name)
    if (value !== undefined) headers[name] = String(value)
  }
  return headers
}

/** Writes whose body was read and parsed (beforeWrite ran). */
const bodyRead = new WeakSet<FastifyRequest>()

/**
 * A write whose body was over the byte limit (413 payload_too_large, refused by Fastify before any
 * parser or hook of ours sees the body; a body refused by the parser comes through beforeWrite as
 * a RefusedBody) took no claim: the fingerprint needs the body. CONTRACT §16 keeps every completed
 * answer but 5xx and 429, so the 413 is stored here, under a fingerprint of what is known of the
 * request (its Content-Length, method, path and query string): a repeat of the same length gets it
 * back, replayed; another length, another query string, or a body that is read is another request
 * (422 idempotency_key_reused). A key still held by a running request leaves the answer as it is.
 */
async function keepUnreadBodyAnswer(db: Db, request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const key = request.headers['idempotency-key']
  const status = reply.statusCode
  if (status !== Errors.PAYLOAD_TOO_LARGE.status || typeof key !== 'string' || !VALID_KEY.test(key) || !request.auth) return payload
  const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : null
  if (body === null) return payload
  const scope = scopeOf(request, key)
  const sealScope = sealScopeOf(scope)
  // The body was not read: it is told from another only by its length (a chunked body has none).
  const length = request.headers['content-length'] ?? 'chunked'
  const fingerprint = createHash('sha256').update(`unread body ${status} ${length}\n${request.method}\n${resourcePath(request)}${request.url.includes('?') ? `?${queryOf(request)}` : ''}`).digest('hex')
  const id = randomUUID()
  try {
    if (await claimKey(db, scope, { id, fingerprint, ttlSeconds: IDEMPOTENCY_TTL_SECONDS, staleSeconds: STALE_CLAIM_SECONDS })) {
      await completeKey(db, scope, id, { status, headers: replayedHeaders(reply), body: sealAnswer(tokenOf(request), sealScope, body) })
      return payload
    }
    const stored = await readKey(db, scope, STALE_CLAIM_SECONDS)
    if (stored === null || stored.status === null) return payload
    if (stored.fingerprint !== fingerprint) {
      // Another body (another length, another query string) than the request the key answered.
      const refusal = errorBody(reused())
      for (const entry of refusal.errors) entry.meta = { request_id: request.id }
      reply.code(Errors.IDEMPOTENCY_KEY_REUSED.status).type('application/json; charset=utf-8')
      return JSON.stringify(refusal)
    }
    const replay = openAnswer(tokenOf(request), sealScope, stored.body ?? '')
    if (replay === null) return payload
    for (const [name, value] of Object.entries(stored.headers ?? {})) reply.header(name, value)
    reply.header('idempotent-replayed', 'true').code(stored.status)
    return replay
  } catch (err) {
    request.log.warn({ err }, 'the answer of an Idempotency-Key could not be kept')
    return payload
  }
}

const HEADER_SCHEMA = {
  type: 'string',
  pattern: '^[\\x21-\\x7e]{1,255}$',
  description: 'Makes the write safe to retry (24 h, per API key, method and path): a repeat with the same body and query string gets the first answer again, '
    + 'byte for byte, with `Idempotent-Replayed: true`, and writes nothing; another body → 422 idempotency_key_reused; '
    + 'while the first runs → 409 idempotency_key_in_use. 5xx and 429 answers are not kept.',
}

/** The route's schema with the header documented (OpenAPI) beside the headers it already declares. */
function withHeaderSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const headers = (schema.headers ?? { type: 'object' }) as { properties?: Record<string, unknown> }
  return { ...schema, headers: { ...headers, properties: { ...(headers.properties ?? {}), 'idempotency-key': HEADER_SCHEMA } } }
}

/**
 * Idempotency-Key on every POST, PATCH, PUT and DELETE of the routes registered after this call
 * in `app` (CONTRACT §16). The stored answers live in the database, so the guarantee holds across
 * server processes on one PostgreSQL.
 */
export function registerIdempotency(app: FastifyInstance, db: Db, running: RunningClaims): void {
  app.decorateRequest('idempotencyKey', undefined)
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    if (methods.some((m) => WRITE_METHODS.has(m))) route.schema = withHeaderSchema((route.schema ?? {}) as Record<string, unknown>)
  })
  app.addHook('preValidation', async (request, reply) => beforeWrite(db, running, request, reply))
  app.addHook('onSend', async (request, reply, payload) => {
    if (!WRITE_METHODS.has(request.method)) return payload
    if (!bodyRead.has(request)) return keepUnreadBodyAnswer(db, request, reply, payload)
    try {
      await afterWrite(db, running, request, reply, payload)
    } catch (err) {
      // The write committed (a shutdown past its timeout may have closed the store's connection
      // since): its client is told what was written rather than an error that would make it send
      // the write again. The key stays claimed until its claim goes stale.
      if (!answerOwed(request)) throw err
      request.log.warn({ err }, 'the answer of an Idempotency-Key could not be kept; the answer is sent all the same')
    }
    return payload
  })
  // A request that never reached onSend (its connection broke first) gives its claim back.
  app.addHook('onResponse', async (request) => {
    const claim = claims.get(request)
    if (claim && !claim.done) {
      claim.done = true
      await releaseKey(db, claim.scope, claim.id).catch(() => undefined)
      release(running, claim)
    }
  })
  const stopPurging = scheduleRounds(() => void purgeExpiredKeys(db).catch(() => undefined), PURGE_EVERY_MS, FIRST_ROUND_AFTER_MS)
  const heartbeat = setInterval(() => {
    const held = running.held()
    if (held.length > 0) void refreshClaims(db, held).catch(() => undefined)
  }, CLAIM_REFRESH_MS)
  heartbeat.unref()
  // The embedded store belongs to this process: a claim found in it at start was its previous
  // run's, which ended (a crash) before answering.
  if (db.kind === 'pglite') app.addHook('onReady', async () => void (await dropUnfinishedClaims(db)))
  app.addHook('onClose', async () => {
    stopPurging()
    clearInterval(heartbeat)
  })
}

export { purgeExpiredKeys }
