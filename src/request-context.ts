import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from './core/config.js'
import type { Db } from './store/db.js'
import type { Authenticator } from './core/auth/authenticate.js'
import type { MetamodelCache } from './metamodel/service.js'
import { INVALIDATE_CHANNEL } from './core/channels.js'
import { ResultCache, DATA_CHANGED_CHANNEL } from './counts/cache.js'
import { dataVersionSql, selectDataVersion } from './events/sql.js'
import { metrics } from './ops/metrics.js'
import type { AggregateRows, RequestContext } from './request/context.js'
import { fencedStore } from './metamodel/fence.js'
import { writes } from './core/writes.js'
import { requestStore } from './core/cut-off.js'

/** What a request's context is read through, and what a change elsewhere empties. */
export interface ContextSources {
  metamodels: MetamodelCache
  authenticator: Authenticator
  /** The store a request reads: the primary, or a replica (ops/read-routing.ts). */
  storeFor(request: FastifyRequest): Promise<Db>
  /** Whether reads may come from a replica. */
  replicated: boolean
}

/**
 * `app.requestContext(request)`: the store a request's service uses, its caller, its
 * organization's metamodel and the counts and aggregates remembered for that organization —
 * and the notifications that empty those caches when another process, or the CLI, changes
 * the setup or the data.
 */
export async function registerRequestContext(app: FastifyInstance, db: Db, config: Config, sources: ContextSources): Promise<void> {
  const { metamodels, storeFor } = sources
  // A replica lags the primary by up to KBIS_READ_AFTER_WRITE_MS (the bound read-after-write
  // already relies on): its results are remembered apart, once it has had that long to catch up.
  const results = config.countCacheSize > 0
    ? new ResultCache(config.countCacheSize, Date.now, sources.replicated ? config.readAfterWriteMs : 0, (kind, outcome) => metrics.resultCache.inc({ kind, outcome }))
    : null
  // On PostgreSQL other processes write too: a remembered result is answered only for the data
  // version it was taken at (read with the request's page, or asked of its store once, when a
  // result is first wanted). PGlite belongs to this process, whose commits the cache hears of itself.
  const versionOf = (store: Db, orgId: string) => (store.kind === 'postgres' ? { version: { ask: () => selectDataVersion(store, orgId), sql: dataVersionSql } } : {})
  app.decorate('requestContext', async (request: FastifyRequest): Promise<RequestContext> => {
    const store = await storeFor(request)
    const source = store === db ? 'primary' : 'replica'
    // `Cache-Control: no-cache`: counts and aggregates are taken afresh (and remembered).
    const fresh = /\bno-cache\b/i.test(String(request.headers['cache-control'] ?? ''))
    const { orgId } = request.auth
    const metamodel = await metamodels.get(orgId)
    return {
      // A write's transactions check that the metamodel it was validated against still holds.
      db: writes(request) ? fencedStore(requestStore(request, store), orgId, metamodel.version, () => metamodels.invalidate(orgId)) : store,
      auth: request.auth,
      metamodel,
      ...(request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : {}),
      requestId: request.id,
      ...(results ? {
        counts: results.memo(request.auth.orgId, { source, fresh, ...versionOf(store, request.auth.orgId) }),
        analytics: results.memo<AggregateRows>(request.auth.orgId, { source, kind: 'analytics', fresh, ...versionOf(store, request.auth.orgId) }),
      } : {}),
    }
  })
  app.decorateRequest('auth', null as never)
  await listenForChanges(app, db, sources, results)
}

/**
 * A setup change anywhere (this process, another server, the CLI) empties the caches. When the
 * listening connection drops (PostgreSQL), it reconnects with back-off; changes made meanwhile
 * were not notified, so every cache is emptied (reloaded on next use) once it is back.
 */
async function listenForChanges(app: FastifyInstance, db: Db, { metamodels, authenticator }: ContextSources, results: ResultCache | null): Promise<void> {
  await db.listen(INVALIDATE_CHANNEL, (orgId) => {
    metamodels.invalidate(orgId || undefined)
    authenticator.invalidate()
    results?.changed(orgId || undefined)
  }, {
    lost: (err, retryInMs) => app.log.warn({ err }, `LISTEN connection lost; reconnecting in ${retryInMs} ms (caches may be stale until then)`),
    reconnected: () => {
      metamodels.invalidate()
      authenticator.invalidate()
      results?.changed()
      app.log.info('LISTEN connection restored; metamodel and key caches reloaded')
    },
  })
  if (!results) return
  // Other processes' writes: the relay that stamps their events says which organizations changed.
  await db.listen(DATA_CHANGED_CHANNEL, (orgIds) => {
    for (const orgId of orgIds.split(',')) if (orgId !== '') results.changed(orgId)
  })
  app.addHook('onClose', async () => results.close())
}
