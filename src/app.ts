import Fastify, { type FastifyHttpOptions, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { Server } from 'node:http'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import cors from '@fastify/cors'
import compress from '@fastify/compress'
import type { Config } from './core/config.js'
import { KBIS_VERSION } from './core/version.js'
import { RouteMethods } from './core/route-methods.js'
import type { Db } from './store/db.js'
import { registerErrorHandling, sendError } from './core/http-errors.js'
import { AppError, Errors } from './core/errors.js'
import { ESCAPE_RULE, registerInputGuards, registerRouteGuards } from './core/http-input.js'
import { clientErrorHandler, registerHttpLayer } from './core/http-layer.js'
import { buildSerializer } from './core/serializer.js'
import { registerStatistics } from './store/statistics.js'
import { Authenticator } from './core/auth/authenticate.js'
import type { RequestContext } from './request/context.js'
import { registerRequestContext } from './request-context.js'
import { MetamodelCache } from './metamodel/service.js'
import { metamodelRoutes } from './metamodel/routes.js'
import { assetRoutes } from './assets/routes.js'
import { openapiRoutes, typedOpenapiRoutes, OPENAPI_INFO } from './openapi/routes.js'
import { transformDocument, transformRoute } from './openapi/operations.js'
import { LIST_FILTER_COLUMNS } from './query/fields.js'
import { apiKeyRoutes, directoryRoutes } from './admin/routes.js'
import { createRateLimiter, enforceRateLimit, redisFailoverMessage, type RateLimiter } from './core/rate-limit.js'
import { requestIdOptions } from './ops/request-id.js'
import { registerOps } from './ops/http.js'
import { MARKS_DOWN_MESSAGE, registerReadRouting, REPLICA_DOWN_MESSAGE } from './ops/read-routing.js'
import { writes } from './core/writes.js'
import { metrics } from './ops/metrics.js'
import type { ReadRouting } from './store/replica.js'
import { registerIdempotency, RunningClaims } from './idempotency/hooks.js'
import { OrgConcurrency, registerOrgConcurrency } from './core/org-concurrency.js'
import type { EventRelay } from './events/relay.js'
import { registerEvents } from './events/plugin.js'
import { registerEventSchemas } from './events/schemas.js'
import { filterNodeSchema } from './query/filter-schema.js'
import { relationshipRoutes } from './relationships/routes.js'
import { bulkRoutes } from './bulk/routes.js'
import { searchRoutes } from './search/routes.js'
import { analyticsRoutes } from './analytics/routes.js'
import { exportRoutes } from './export/routes.js'
import { eventRoutes } from './events/routes.js'
import { createWebhookWorker, webhookRoutes } from './webhooks/plugin.js'
import type { WebhookWorker } from './webhooks/worker.js'
import { answerConsoleRouterError, consoleRoutes } from './console/plugin.js'
import { validatorCompiler } from './core/validators.js'

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


/** How long a request (line, headers, body) may take to arrive. */
export const REQUEST_TIMEOUT_MS = 300_000

/** How often the batched `last_used_at` values are written. */
export const LAST_USED_FLUSH_MS = 1_000

/** Builds the whole application without listening (tests drive it with `inject`). */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { db, config } = options
  const app = Fastify(fastifyOptions(options))
  // Shared body schemas: the routes refer to them by $id (app.addSchema puts them in the OpenAPI document).
  app.setValidatorCompiler(validatorCompiler([filterNodeSchema]))
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
  const rateLimiter = options.rateLimiter ?? createRateLimiter(db, config, (err) => app.log.warn({ err }, redisFailoverMessage(db)))
  const readRouting = options.readRouting !== undefined ? options.readRouting : await openReadRoutingFor(db, config, app)
  const storeFor = registerReadRouting(app, readRouting, db)
  await registerRequestContext(app, db, config, { metamodels, authenticator, storeFor, replicated: readRouting !== null })
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

  await registerResponseHandling(app, config)
  await registerApiReference(app)
  registerEventSchemas(app)
  app.addSchema(filterNodeSchema)
  await app.register(apiRoutes({ db, config, authenticator, rateLimiter, webhooks: createWebhookWorker(app) }), { prefix: '/api/v1' })
  // The interactive API reference (Swagger UI, its assets served from node_modules): a page for a
  // browser, which cannot send an API key to open it, so outside /api/v1, where every request but
  // the base OpenAPI description needs one (spec, Authentication 1). It shows the base document.
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true, persistAuthorization: false } })
  // The console (CONTRACT §15): HTML, its own session auth, never under /api/v1.
  await app.register(consoleRoutes, { prefix: '/console' })
  return app
}

// Room for a composite key with the longest unique value, percent-encoded (500 × 12 + keys).
const ROUTER_OPTIONS = { ignoreTrailingSlash: true, maxParamLength: 8192 }

function fastifyOptions({ config, logger }: AppOptions): FastifyHttpOptions<Server> {
  return {
    logger: logger ?? false,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustedProxies.length > 0 ? config.trustedProxies : false,
    routerOptions: ROUTER_OPTIONS,
    // A draining server answers 503 in the CONTRACT's envelope itself (src/ops/http.ts).
    return503OnClosing: false,
    // Route modules load inside plugins; on a busy machine that may take more than Fastify's 10 s.
    pluginTimeout: 60_000,
    // A request (line, headers and body) must arrive within Node's own default, 5 minutes (8 MiB
    // of a bulk at 30 kB/s), or it is answered 408 (core/http-layer.ts); Fastify's default is none.
    requestTimeout: REQUEST_TIMEOUT_MS,
    ...requestIdOptions(),
    // Responses: fast-json-stringify, free-form objects written whole (core/serializer.ts).
    schemaController: { compilersFactory: { buildSerializer } },
    // 431, a malformed request line, a slow client: answered in the envelope (core/http-layer.ts),
    // as is an HTTP/1.1 request without Host, which Node would answer with a bare 400 itself.
    clientErrorHandler,
    // Node checks the header (60 s) and request (5 min) timeouts every 30 s by default, so a 408
    // came up to 30 s late and headers finished in that time were served (outside audit): every second.
    http: { requireHostHeader: false, connectionsCheckingInterval: 1_000 },
    // Errors the router raises before any route runs, in the same envelope as every other error.
    frameworkErrors: (error, request, reply) => {
      // The console's pages are HTML, its errors too.
      if (/^\/console(?:[/?]|$)/.test(request.url)) return answerConsoleRouterError(error, request, reply as FastifyReply)
      if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return sendError(reply, new AppError(Errors.NOT_FOUND, 'a path segment is longer than any id or composite key can be'))
      if (error.code === 'FST_ERR_BAD_URL') return sendError(reply, new AppError(Errors.INVALID_REQUEST, `the URL is malformed: ${ESCAPE_RULE}`))
      return sendError(reply, new AppError(Errors.INVALID_REQUEST, error.message))
    },
  }
}

/** CORS for the configured browser origins, and compression of the answers. */
async function registerResponseHandling(app: FastifyInstance, config: Config): Promise<void> {
  // Browsers of the configured origins may call the API (off unless KBIS_CORS_ORIGINS is set).
  if (config.corsOrigins.length > 0) {
    await app.register(cors, {
      origin: config.corsOrigins,
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
      exposedHeaders: ['Location', 'X-Request-Id', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Idempotent-Replayed'],
      maxAge: 600,
      // An OPTIONS without Origin or Access-Control-Request-Method (no preflight) is answered 204
      // like one, not with the plugin's bare text/plain 400 outside the envelope (CONTRACT §1).
      strictPreflight: false,
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
  // A HEAD answer carries the headers GET's would (RFC 9110 §9.3.2: Content-Encoding, Vary, no
  // uncompressed Content-Length): the HEAD route Fastify adds drops the body before the compression
  // hook, pushed after it, would see it, so that step is moved last.
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD' || !Array.isArray(route.onSend)) return
    const handlers = route.onSend as Array<(...args: never[]) => unknown>
    const dropBody = handlers.findIndex((fn) => fn.name === 'headRouteOnSendHandler')
    if (dropBody >= 0) handlers.push(...handlers.splice(dropBody, 1))
  })
}

/** The OpenAPI document the routes' own schemas make (CONTRACT §11). */
async function registerApiReference(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    // Shared schemas (app.addSchema, e.g. one per event type) keep their $id as component name.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    openapi: {
      openapi: '3.1.0',
      info: OPENAPI_INFO(KBIS_VERSION),
      servers: [{ url: '/' }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: kbis_<prefix>_<secret>' } } },
      security: [{ bearerAuth: [] }],
    },
    // An operationId per operation, every query parameter named (src/openapi/operations.ts).
    transform: transformRoute(LIST_FILTER_COLUMNS),
    transformObject: transformDocument,
  })
}

interface ApiParts {
  db: Db
  config: Config
  authenticator: Authenticator
  rateLimiter: RateLimiter
  webhooks: WebhookWorker
}

/** Everything under /api/v1: the open OpenAPI routes and reference, then the authenticated routes. */
function apiRoutes({ db, config, authenticator, rateLimiter, webhooks }: ApiParts) {
  const orgConcurrency = new OrgConcurrency(
    config.orgConcurrency > 0 ? config.orgConcurrency : Math.max(1, Math.floor(config.poolSize / 2)),
    // A request waits for a slot at most three statement timeouts (30 s by default): long enough
    // for the slots' own requests to end, short enough that a client is not left hanging.
    Math.max(30_000, 3 * config.statementTimeoutMs),
  )
  // The key, then the organization's quota: only requests of a known organization count against
  // it, those its plan or its IP allowlist refuses too, answered with the quota's headers as every
  // authenticated answer (CONTRACT §10).
  const admit = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const { context, refusal } = await authenticator.identify(request)
    request.auth = context
    await enforceRateLimit(rateLimiter, request, reply)
    if (refusal) throw refusal
  }
  return async (api: FastifyInstance): Promise<void> => {
    // A path no route serves is authenticated too (spec: every request but the base OpenAPI
    // description): without a valid key 401, as on every route, so no one learns without a key
    // which paths exist; with one, 404.
    const methods = new RouteMethods(ROUTER_OPTIONS)
    api.addHook('onRoute', (route) => methods.add(route.method, route.url))
    api.setNotFoundHandler(async (request, reply) => {
      await admit(request, reply)
      const path = request.url.split('?')[0]!
      const allowed = methods.allowed(path)
      if (allowed.length === 0) return sendError(reply, new AppError(Errors.NOT_FOUND, `no route ${request.method} ${path}`))
      reply.header('allow', allowed.join(', '))
      return sendError(reply, new AppError(Errors.NOT_FOUND, `no route ${request.method} ${path}: it takes ${allowed.join(', ')}`))
    })
    await api.register(openapiRoutes)
    await api.register(async (authed) => {
      authed.addHook('onRequest', admit)
      // One organization cannot hold every pooled connection (docs/configuration.md, KBIS_ORG_CONCURRENCY).
      // A repeat of an Idempotency-Key whose request runs here is answered at once (409 or 422),
      // not after waiting for the organization's turn behind that request.
      const runningClaims = new RunningClaims()
      registerOrgConcurrency(authed, orgConcurrency, (request) => runningClaims.repeatsRunning(request))
      // On PostgreSQL other processes revoke and change keys: a write checks its key in the store
      // (not a search or an analytics POST, which read) and is judged with the key as it is now,
      // before its Idempotency-Key is looked at (a revoked key's repeat is no replay, and a refusal
      // of the key is not kept as the key's answer) and before any permission check (the routes'
      // own preValidation hooks run after these).
      if (db.kind === 'postgres') {
        authed.addHook('preValidation', async (request) => {
          if (writes(request)) request.auth = await authenticator.confirm(db, request.auth)
        })
      }
      registerIdempotency(authed, db, runningClaims)
      registerRouteGuards(authed)
      // Every authenticated route, one flat list.
      for (const routes of [
        metamodelRoutes, assetRoutes, relationshipRoutes, apiKeyRoutes, directoryRoutes, typedOpenapiRoutes,
        bulkRoutes, searchRoutes, analyticsRoutes, exportRoutes, eventRoutes, webhookRoutes(webhooks),
      ]) await authed.register(routes)
    })
  }
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
    onMarksDown: (err) => app.log.warn({ err }, MARKS_DOWN_MESSAGE),
  })
}
