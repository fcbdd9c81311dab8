import type { FastifyInstance } from 'fastify'
import type { Db } from '../store/db.js'
import { pendingMigrations } from '../store/migrate.js'
import { AppError, Errors } from '../core/errors.js'
import type { Lifecycle } from './lifecycle.js'
import { DRAIN_RETRY_AFTER_SECONDS } from './lifecycle.js'

/** A store that has not answered by then is down for readiness (a hung connection must not hang the probe). */
const STORE_PROBE_MS = 2_000

const status = { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } }, required: ['status'] } as const

async function storeProblem(db: Db): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`the store did not answer within ${STORE_PROBE_MS} ms`), STORE_PROBE_MS)
  })
  const probe = (async () => {
    const pending = await pendingMigrations(db)
    return pending.length > 0 ? `migrations not applied yet: ${pending.join(', ')}` : null
  })().catch(() => 'the store does not answer')
  try {
    return await Promise.race([probe, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * `GET /healthz` (the process runs) and `GET /readyz` (it can serve: the store answers, its
 * migrations are current, it is not draining). Outside /api/v1, without authentication, and left
 * out of the API's OpenAPI document: they are for load balancers and orchestrators.
 */
export function registerHealthRoutes(app: FastifyInstance, db: Db, lifecycle: Lifecycle): void {
  app.get('/healthz', { schema: { hide: true, response: { 200: status } } }, async () => ({ status: 'ok' as const }))
  app.get('/readyz', { schema: { hide: true, response: { 200: status } } }, async () => {
    const problem = lifecycle.draining ? 'the server is shutting down' : lifecycle.starting ? 'the server is starting' : await storeProblem(db)
    if (problem !== null) {
      throw new AppError(Errors.SERVICE_UNAVAILABLE, `not ready: ${problem}`, { 'Retry-After': String(DRAIN_RETRY_AFTER_SECONDS) })
    }
    return { status: 'ok' as const }
  })
}
