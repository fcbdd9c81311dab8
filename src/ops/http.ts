import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Db } from '../store/db.js'
import { AppError, Errors } from '../core/errors.js'
import { sendError } from '../core/http-errors.js'
import { onLayerAnswer } from '../core/http-layer.js'
import { metrics } from './metrics.js'
import { callerKeyId } from '../core/auth/context.js'
import { DRAIN_RETRY_AFTER_SECONDS, Lifecycle } from './lifecycle.js'
import { registerHealthRoutes } from './health.js'
import { cutOff } from '../core/cut-off.js'

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle
    /** Runs `fn` at shutdown, after the last request in flight and before the store closes. */
    onShutdown(fn: () => Promise<void> | void): void
    /**
     * A shutdown past its timeout: closes every connection but those of requests whose changes are
     * committing (core/cut-off.ts); returns how many of those it left to finish their answers.
     */
    cutOffConnections(): number
  }
}

/** The route pattern (`/api/v1/assets/:id`), never the path itself: metric labels stay few. */
function routeOf(request: FastifyRequest): string {
  return request.routeOptions.url ?? 'unmatched'
}

/** Requests whose line is written: the close of every response comes after its onResponse, if any. */
const accounted = new WeakSet<FastifyRequest>()

/**
 * One JSON line per request: who (organization key, API key id; never the secret), what (method,
 * route pattern), how it ended (status, duration). Never a body, a query string or a header value.
 * With its metrics; once per request, whether it completed or its connection closed first (a
 * client gone mid-answer, a stream that broke off after its headers: Fastify then runs no
 * onResponse, and the request had no line at all).
 */
function accountFor(lifecycle: Lifecycle, request: FastifyRequest, reply: FastifyReply, completed: boolean): void {
  if (accounted.has(request)) return
  accounted.add(request)
  lifecycle.inFlight--
  // A connection that closed before the handler gave any answer (a client that gave up on a slow
  // search, a shutdown past its timeout) has no status: not the 200 a reply starts with.
  const status = completed || reply.sent || reply.raw.headersSent ? reply.statusCode : null
  metrics.httpDuration.observe({ method: request.method, route: routeOf(request), status_code: status === null ? 'none' : String(status) }, reply.elapsedTime / 1000)
  if (reply.statusCode === 429) metrics.rateLimited.inc()
  // An API key's, or a console user's session (whose organization the line names too).
  const auth = (request.auth as FastifyRequest['auth'] | null) ?? request.console?.ctx.auth ?? null
  const line = {
    method: request.method,
    route: routeOf(request),
    status_code: status,
    duration_ms: Math.round(reply.elapsedTime * 100) / 100,
    org_key: auth?.orgKey ?? null,
    api_key_id: auth ? callerKeyId(auth) : null,
  }
  if (completed) request.log.info(line, 'request completed')
  else request.log.warn({ ...line, completed: false }, 'request ended before its answer was complete')
}

function rejectWhileDraining(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  if (request.url === '/healthz') return undefined
  reply.header('Connection', 'close')
  return sendError(reply, new AppError(Errors.SERVICE_UNAVAILABLE, 'the server is shutting down; retry on another instance or later',
    { 'Retry-After': String(DRAIN_RETRY_AFTER_SECONDS) }))
}

/**
 * While draining, a keep-alive connection whose answer began before (an export streaming when
 * SIGTERM came) would stay open and idle until the shutdown timeout: the server's close ends only
 * the connections idle at that moment. Once the answer is sent whole and detached from its
 * connection, the connection is ended (after what it still has to send) and destroyed a second
 * later if the client keeps it open. (Not `closeIdleConnections()`: it also destroys connections
 * whose answer has ended but is still being written, cutting off their last bytes.)
 */
function closeOnceIdle(socket: Socket | null): void {
  // (An injected request's socket is a stand-in without end().)
  if (socket === null || typeof socket.end !== 'function') return
  setImmediate(() => {
    if (socket.destroyed || (socket as Socket & { _httpMessage?: unknown })._httpMessage) return
    socket.end()
    setTimeout(() => socket.destroy(), 1_000).unref()
  })
}

/**
 * Operations (CONTRACT §17) for the whole app: the request id on every response, the draining
 * 503, request metrics and the request log line, /healthz and /readyz, shutdown callbacks.
 */
export function registerOps(app: FastifyInstance, db: Db): void {
  const lifecycle = new Lifecycle()
  app.decorate('lifecycle', lifecycle)
  app.decorate('onShutdown', (fn: () => Promise<void> | void) => lifecycle.onShutdown(fn))
  const pool = (db as { pool?: { totalCount: number; idleCount: number; waitingCount: number } }).pool
  const unwatch = pool
    ? metrics.watchPool(() => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }))
    : () => undefined

  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id)
    // Answers hold an organization's data, and some secrets (new API keys, webhook secrets): no
    // browser or proxy cache keeps them (the console's static files say otherwise, console/plugin.ts).
    reply.header('Cache-Control', 'no-store')
    // An answer that finished has its line from onResponse; one that did not gets it here, after
    // any onResponse of the same moment (an injected response never reads as finished).
    lifecycle.inFlight++
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) setImmediate(() => accountFor(lifecycle, request, reply, false))
    })
    if (lifecycle.draining) return rejectWhileDraining(request, reply)
    return undefined
  })
  // A request that was in flight when draining began still gets its answer, on a closing connection.
  app.addHook('onSend', async (_request, reply) => {
    if (lifecycle.draining) reply.header('Connection', 'close')
  })
  app.addHook('onResponse', async (request, reply) => {
    if (lifecycle.draining) closeOnceIdle(request.raw.socket)
    return accountFor(lifecycle, request, reply, true)
  })
  // And every connection that has no answer in progress while the server drains, checked four
  // times a second: one the server's close leaves open (a request begun and never finished; the
  // keep-alive connection of the drain test under load, whose cause was not pinned down) would
  // otherwise hold the exit until the timeout. onResponse above ends a finishing one at once.
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.decorate('cutOffConnections', () => cutOff(sockets))
  let sweep: NodeJS.Timeout | undefined
  lifecycle.onDrain(() => {
    const ending = new WeakSet<Socket>()
    sweep = setInterval(() => {
      for (const socket of sockets) {
        if (ending.has(socket) || (socket as Socket & { _httpMessage?: unknown })._httpMessage) continue
        ending.add(socket)
        closeOnceIdle(socket)
      }
    }, 250)
    sweep.unref()
  })
  // Answers of the HTTP layer (431, a malformed request line, CONNECT, a slow client) have a line
  // too, with the id their answer carries. No request was read, so there is no route, caller or
  // duration: counted with a duration of 0.
  onLayerAnswer(app, ({ requestId, method, status }) => {
    metrics.httpDuration.observe({ method, route: 'unmatched', status_code: String(status) }, 0)
    app.log.info({ request_id: requestId, method, route: 'unmatched', status_code: status, duration_ms: 0, org_key: null, api_key_id: null },
      'request answered by the HTTP layer')
  })
  app.addHook('onClose', async () => {
    clearInterval(sweep)
    await lifecycle.runShutdownHooks((err) => app.log.error({ err }, 'a shutdown callback failed'))
    unwatch()
  })
  registerHealthRoutes(app, db, lifecycle)
}
