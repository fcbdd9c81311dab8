import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Db } from '../store/db.js'
import type { ReadRouting } from '../store/replica.js'
import { writes } from '../core/writes.js'

/**
 * The routes whose reads may come from a replica (CONTRACT §17: lists, search, analytics, export),
 * as `METHOD pattern`. A read by id stays on the primary: it is cheap, and a client that has just
 * been told an id expects to find it.
 */
export const REPLICA_READ_ROUTES = new Set([
  'GET /api/v1/assets',
  'GET /api/v1/relationships',
  'POST /api/v1/search/assets',
  'POST /api/v1/search/relationships',
  'POST /api/v1/analytics/assets',
  'GET /api/v1/export/assets',
])

export const REPLICA_DOWN_MESSAGE = 'read replica unavailable; reading from the primary for a while'
export const MARKS_DOWN_MESSAGE = 'read-after-write Redis unavailable; recent writers read from the primary, marks told through it, for a while'

function routeKey(request: FastifyRequest): string {
  return `${request.method} ${request.routeOptions.url ?? ''}`
}


/**
 * Marks each successful write of an API key before its answer leaves (so the client's next read,
 * on any process, sees the mark), and returns the store a request's service should use.
 */
export function registerReadRouting(app: FastifyInstance, routing: ReadRouting | null, primary: Db): (request: FastifyRequest) => Promise<Db> {
  if (routing === null) return async () => primary
  app.addHook('onSend', async (request, reply) => {
    const auth = request.auth as FastifyRequest['auth'] | null
    if (auth === null || !writes(request)) return
    if (reply.statusCode >= 300) return
    await routing.markWrite(auth.orgId, auth.keyId).catch((err: unknown) => request.log.warn({ err }, 'read-after-write mark failed'))
  })
  app.addHook('onClose', async () => routing.close())
  return async (request) => {
    const auth = request.auth as FastifyRequest['auth'] | null
    if (auth === null || !REPLICA_READ_ROUTES.has(routeKey(request))) return primary
    // A replica found down while this request reads is logged on its line's logger (request id).
    return routing.readerFor(auth.orgId, auth.keyId, (err) => request.log.warn({ err }, REPLICA_DOWN_MESSAGE))
  }
}
