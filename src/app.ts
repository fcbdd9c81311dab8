import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import cors from '@fastify/cors'
import compress from '@fastify/compress'
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import type { Config } from './core/config.js'
import { BACKGROUND_SQL, type Db } from './store/db.js'
import { registerErrorHandling, sendError } from './core/http-errors.js'
import { AppError, Errors } from './core/errors.js'
import { ESCAPE_RULE, registerInputGuards, registerRouteGuards } from './core/http-input.js'
import { clientErrorHandler, registerHttpLayer } from './core/http-layer.js'
import { buildSerializer } from './core/serializer.js'
import { registerStatistics } from './store/statistics.js'
import { Authenticator } from './core/auth/authenticate.js'
import type { AggregateRows, RequestContext } from './request/context.js'
import { MetamodelCache } from './metamodel/service.js'
import { metamodelRoutes } from './metamodel/routes.js'
import { assetRoutes } from './assets/routes.js'
import { openapiRoutes, typedOpenapiRoutes, OPENAPI_INFO } from './openapi/routes.js'
import { transformDocument, transformRoute } from './openapi/operations.js'
import { LIST_FILTER_COLUMNS } from './query/fields.js'
import { apiKeyRoutes, directoryRoutes } from './admin/routes.js'
import { createRateLimiter, enforceRateLimit, redisFailoverMessage, type RateLimiter } from './core/rate-limit.js'
import { readFileSync } from 'node:fs'
import { requestIdOptions } from './ops/request-id.js'
import { registerOps } from './ops/http.js'
import { registerReadRouting, REPLICA_DOWN_MESSAGE, writes } from './ops/read-routing.js'
import { metrics } from './ops/metrics.js'
import type { ReadRouting } from './store/replica.js'
import { registerIdempotency, RunningClaims } from './idempotency/hooks.js'
import { OrgConcurrency, registerOrgConcurrency } from './core/org-concurrency.js'
import { EventRelay } from './events/relay.js'
import { registerEventSchemas } from './events/schemas.js'
import { dataVersionSql, selectDataVersion } from './events/sql.js'
import { INVALIDATE_CHANNEL } from './core/channels.js'
import { ResultCache, DATA_CHANGED_CHANNEL } from './counts/cache.js'
import { relationshipRoutes } from './relationships/routes.js'
import { bulkRoutes } from './bulk/routes.js'
import { searchRoutes } from './search/routes.js'
import { analyticsRoutes } from './analytics/routes.js'
import { exportRoutes } from './export/routes.js'
import { eventRoutes } from './events/routes.js'
import { createWebhookWorker, webhookRoutes } from './webhooks/plugin.js'
import { consoleRoutes } from './console/plugin.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Db
    config: Config
    metamodels: MetamodelCache
    authenticator: Authenticator
    /** The event relay (src/events/relay.ts): stamps the outbox, runs the stamped/committed hooks. */
    events: EventRelay
    /** The store, the caller and its metamodel, for services (which never see `request`). */
    requestContext(request: FastifyRequest): Promise<RequestContext>
  }
}

export interface AppOptions {
  db: Db
  config: Config
  logger?: FastifyServerOptions['logger']
  /** The rate limiter (tests share one Redis prefix between apps); by default from `config` and the store. */
  rateLimiter?: RateLimiter
  /** Lists, search and analytics on a read replica (CONTRACT §17); by default from `config.databaseReadUrl`. */
  readRouting?: ReadRouting | null
}


/** How often the batched `last_used_at` values are written. */
export const LAST_USED_FLUSH_MS = 1_000

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version

/**
 * Schemas are compiled once per route at start. Bodies are validated strictly (no coercion, no
 * silent removal of unknown members); query strings and path parameters arrive as text, so
 * their numbers are coerced.
 */
function validatorCompilers() {
  const options = { allErrors: true, strict: false, removeAdditional: false, useDefaults: true } as const
  const body = new Ajv({ ...options, coerceTypes: false })
  const query = new Ajv({ ...options, coerceTypes: true })
  for (const ajv of [body, query]) addFormats.default(ajv)
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) =>
    (httpPart === 'body' ? body : query).compile(schema)
}

/** Builds the whole application without listening (tests drive it with `inject`). */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { db, config } = options
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustedProxies.length > 0 ? config.trustedProxies : false,
    // Room for a composite key with the longest unique value, percent-encoded (500 × 12 + keys).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 8192 },
    // A draining server answers 503 in the CONTRACT's envelope itself (src/ops/http.ts).
    return503OnClosing: false,
    // Route modules load inside plugins; on a busy machine that may take more than Fastify's 10 s.
    pluginTimeout: 60_000,
    ...requestIdOptions(),
    // Responses: fast-json-stringify, free-form objects written whole (core/serializer.ts).
    schemaController: { compilersFactory: { buildSerializer } },
    // 431, a malformed request line, a slow client: answered in the envelope (core/http-layer.ts),
    // as is an HTTP/1.1 request without Host, which Node would answer with a bare 400 itself.
    clientErrorHandler,
    http: { requireHostHeader: false },
    // Errors the router raises before any route runs, in the same envelope as every other error.
    frameworkErrors: (error, _request, reply) => {
      if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return sendError(reply, new AppError(Errors.NOT_FOUND, 'a path segment is longer than any id or composite key can be'))
      if (error.code === 'FST_ERR_BAD_URL') return sendError(reply, new AppError(Errors.INVALID_REQUEST, `the URL is malformed: ${ESCAPE_RULE}`))
      return sendError(reply, new AppError(Errors.INVALID_REQUEST, error.message))
    },
  })
  app.setValidatorCompiler(validatorCompilers())
  registerErrorHandling(app)
  registerHttpLayer(app)
  registerInputGuards(app)
  registerOps(app, db)

  const metamodels = new MetamodelCache(db)
  const authenticator = new Authenticator(db)
  app.decorate('db', db)
  app.decorate('config', config)
  app.decorate('metamodels', metamodels)
  app.decorate('authenticator', authenticator)
  const orgConcurrency = new OrgConcurrency(
    config.orgConcurrency > 0 ? config.orgConcurrency : Math.max(1, Math.floor(config.poolSize / 2)),
    // A request waits for a slot at most three statement timeouts (30 s by default): long enough
    // for the slots' own requests to end, short enough that a client is not left hanging.
    Math.max(30_000, 3 * config.statementTimeoutMs),
  )
  const rateLimiter = options.rateLimiter ?? createRateLimiter(db, config, (err) => app.log.warn({ err }, redisFailoverMessage(db)))
  const readRouting = options.readRouting !== undefined ? options.readRouting : await openReadRoutingFor(db, config, app)
  const storeFor = registerReadRouting(app, readRouting, db)
  // A replica lags the primary by up to KBIS_READ_AFTER_WRITE_MS (the bound read-after-write
  // already relies on): its results are remembered apart, once it has had that long to catch up.
  const results = config.countCacheSize > 0
    ? new ResultCache(config.countCacheSize, Date.now, readRouting === null ? 0 : config.readAfterWriteMs, (kind, outcome) => metrics.resultCache.inc({ kind, outcome }))
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
    return {
      db: store,
      auth: request.auth,
      metamodel: await metamodels.get(request.auth.orgId),
      ...(request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : {}),
      requestId: request.id,
      ...(results ? {
        counts: results.memo(request.auth.orgId, { source, fresh, ...versionOf(store, request.auth.orgId) }),
        analytics: results.memo<AggregateRows>(request.auth.orgId, { source, kind: 'analytics', fresh, ...versionOf(store, request.auth.orgId) }),
      } : {}),
    }
  })
  app.decorateRequest('auth', null as never)

  // A setup change anywhere (this process, another server, the CLI) empties the caches.
  // When the listening connection drops (PostgreSQL), it reconnects with back-off; changes made
  // meanwhile were not notified, so every cache is emptied (reloaded on next use) once it is back.
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
  // Other processes' writes: the relay that stamps their events says which organizations changed.
  if (results) {
    await db.listen(DATA_CHANGED_CHANNEL, (orgIds) => {
      for (const orgId of orgIds.split(',')) if (orgId !== '') results.changed(orgId)
    })
    app.addHook('onClose', async () => results.close())
  }
  registerStatistics(app, db, (kind, seconds) => metrics.storeUpkeep.observe({ kind }, seconds))
  registerEvents(app, db, config)
  // last_used_at shows within a few seconds of use (CONTRACT §9): one batched statement a second at most.
  const flush = setInterval(() => void authenticator.flushLastUsed().catch(() => undefined), LAST_USED_FLUSH_MS)
  flush.unref()
  app.addHook('onClose', async () => {
    clearInterval(flush)
    await authenticator.flushLastUsed().catch(() => undefined)
    await rateLimiter.close().catch(() => undefined)
  })

  // Browsers of the configured origins may call the API (off unless KBIS_CORS_ORIGINS is set).
  if (config.corsOrigins.length > 0) {
    await app.register(cors, {
      origin: config.corsOrigins,
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
      exposedHeaders: ['Location', 'X-Request-Id', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Idempotent-Replayed'],
      maxAge: 600,
    })
  }
  // Responses over 1 KiB are compressed when the client accepts it (streams too: export, NDJSON).
  // Request bodies are not decompressed: a body is read as sent, within the byte limits.
  await app.register(compress, {
    threshold: 1024,
    globalDecompression: false,
    encodings: ['gzip', 'br', 'deflate'],
    // JSON, text, CSV, NDJSON (the export stream, compressed as it goes) and YAML.
    customTypes: /^text\/(?!event-stream)|[+/]json(?:;|$)|\/x-ndjson(?:;|$)|\/yaml(?:;|$)/,
  })

  await app.register(swagger, {
    // Shared schemas (app.addSchema, e.g. one per event type) keep their $id as component name.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    openapi: {
      openapi: '3.1.0',
      info: OPENAPI_INFO(VERSION),
      servers: [{ url: '/' }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: kbis_<prefix>_<secret>' } } },
      security: [{ bearerAuth: [] }],
    },
    // An operationId per operation, every query parameter named (src/openapi/operations.ts).
    transform: transformRoute(LIST_FILTER_COLUMNS),
    transformObject: transformDocument,
  })

  registerEventSchemas(app)
  const webhooks = createWebhookWorker(app)

  // The key, then the organization's quota: only requests of a known organization count against
  // it, those its plan or its IP allowlist refuses too, answered with the quota's headers as every
  // authenticated answer (CONTRACT §10).
  const admit = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const { context, refusal } = await authenticator.identify(request)
    request.auth = context
    await enforceRateLimit(rateLimiter, request, reply)
    if (refusal) throw refusal
  }
  await app.register(async (api) => {
    // A path no route serves is authenticated too (spec: every request but the base OpenAPI
    // description): without a valid key 401, as on every route, so no one learns without a key
    // which paths exist; with one, 404.
    api.setNotFoundHandler(async (request, reply) => {
      await admit(request, reply)
      return sendError(reply, new AppError(Errors.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`))
    })
    await api.register(openapiRoutes)
    // The interactive API reference (Swagger UI, its assets served from node_modules), no key needed.
    await api.register(swaggerUi, { routePrefix: '/docs', indexPrefix: '/api/v1', uiConfig: { deepLinking: true, persistAuthorization: false } })
    await api.register(async (authed) => {
      authed.addHook('onRequest', admit)
      // On PostgreSQL other processes revoke and change keys: a write checks its key in the store
      // (not a search or an analytics POST, which read).
      if (db.kind === 'postgres') {
        authed.addHook('preHandler', async (request) => {
          if (writes(request)) await authenticator.confirm(db, request.auth)
        })
      }
      // One organization cannot hold every pooled connection (docs/configuration.md, KBIS_ORG_CONCURRENCY).
      // A repeat of an Idempotency-Key whose request runs here is answered at once (409 or 422),
      // not after waiting for the organization's turn behind that request.
      const runningClaims = new RunningClaims()
      registerOrgConcurrency(authed, orgConcurrency, (request) => runningClaims.repeatsRunning(request))
      registerIdempotency(authed, db, runningClaims)
      registerRouteGuards(authed)
      // Every authenticated route, one flat list.
      for (const routes of [
        metamodelRoutes, assetRoutes, relationshipRoutes, apiKeyRoutes, directoryRoutes, typedOpenapiRoutes,
        bulkRoutes, searchRoutes, analyticsRoutes, exportRoutes, eventRoutes, webhookRoutes(webhooks),
      ]) await authed.register(routes)
    })
  }, { prefix: '/api/v1' })
  // The console (CONTRACT §15): HTML, its own session auth, never under /api/v1.
  await app.register(consoleRoutes, { prefix: '/console' })

  return app
}

/**
 * The event relay of this process: polls for unstamped events, is woken when this process
 * commits a transaction that wrote events (eventsWritten in outbox/write.ts), stops (stamping
 * and publishing what is left) when the app closes.
 */
function registerEvents(app: FastifyInstance, db: Db, config: Config): void {
  const relay = new EventRelay(db, {
    // PGlite belongs to this process: its writes wake the relay, so a slow safety-net poll is
    // enough (every poll runs on the event loop's thread there).
    intervalMs: db.kind === 'pglite' ? Math.max(config.eventRelayIntervalMs, 5000) : config.eventRelayIntervalMs,
    retentionDays: config.eventRetentionDays,
    publishes: config.natsUrl !== undefined,
    onError: (err) => app.log.error({ err }, 'event relay failed'),
    // The first of a run of identical failures with its stack; the next ones a line each.
    onRoundFailed: (err, retry) => retry.repeated
      ? app.log.warn(`event relay still failing (${retry.failures} attempts: ${(err as Error).message}); retrying in ${retry.retryInMs} ms`)
      : app.log.error({ err }, `event relay failed; retrying in ${retry.retryInMs} ms`),
  })
  app.decorate('events', relay)
  // Every asset and relationship write emits events: the organizations of a stamped batch tell
  // every process (counts/cache.ts) that their data changed. Only PostgreSQL has other processes.
  if (db.kind === 'postgres') {
    relay.onCommitted(async (_events, orgIds) => {
      // A payload holds at most 8,000 bytes: 100 ids of 36 characters per notification.
      for (let i = 0; i < orgIds.length; i += 100) {
        await db.query(`${BACKGROUND_SQL}SELECT pg_notify($1, $2)`, [DATA_CHANGED_CHANNEL, orgIds.slice(i, i + 100).join(',')])
      }
    })
  }
  app.addHook('onReady', async () => {
    // The store's way of stamping (PGlite: positions drawn when events are written), before any
    // request writes one.
    await relay.prepare()
    if (config.natsUrl) {
      const { attachNats } = await import('./events/nats.js')
      const options = { url: config.natsUrl, stream: config.natsStream, onError: (err: unknown) => app.log.error({ err }, 'NATS publication failed; retrying') }
      // NATS down at start does not stop the API: events stay pending (stamped, not published)
      // until a connection succeeds, here or in another process. No attempt starts once the app
      // is closing, and one under way is waited for and closed with it: an attempt that went on
      // after the close created the stream again and left its connection open.
      const attach = (): void => {
        if (closed) return
        nats.attaching = attachNats(relay, db, options).then((sink) => { nats.sink = sink }, (err: unknown) => {
          app.log.error({ err }, err instanceof Error && err.name === 'NatsStreamError' ? `${err.message}; retrying in 5 s` : 'NATS unreachable; retrying in 5 s')
          setTimeout(attach, 5000).unref()
        })
      }
      attach()
    }
    relay.start()
  })
  let closed = false
  const nats: { attaching: Promise<void> | null; sink: { close(): Promise<void> } | null } = { attaching: null, sink: null }
  app.addHook('onClose', async () => {
    closed = true
    await nats.attaching
    await relay.stop()
    await nats.sink?.close()
  })
}

async function openReadRoutingFor(db: Db, config: Config, app: FastifyInstance): Promise<ReadRouting | null> {
  if (!config.databaseReadUrl) return null
  if (db.kind !== 'postgres') throw new Error('DATABASE_READ_URL names a replica of the PostgreSQL primary: set DATABASE_URL too')
  const { openReadRouting } = await import('./store/replica.js')
  return openReadRouting(db, {
    readUrl: config.databaseReadUrl,
    readAfterWriteMs: config.readAfterWriteMs,
    redisUrl: config.redisUrl,
    poolSize: config.poolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    parallelSetupCost: config.pgParallelSetupCost,
    onReplicaDown: (err) => app.log.warn({ err }, REPLICA_DOWN_MESSAGE),
  })
}
