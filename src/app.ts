import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import cors from '@fastify/cors'
import compress from '@fastify/compress'
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import type { Config } from './core/config.js'
import type { Db } from './store/db.js'
import { registerErrorHandling, sendError } from './core/http-errors.js'
import { AppError, Errors } from './core/errors.js'
import { registerInputGuards } from './core/http-input.js'
import { clientErrorHandler, registerHttpLayer } from './core/http-layer.js'
import { registerStatistics } from './store/statistics.js'
import { Authenticator } from './core/auth/authenticate.js'
import type { RequestContext } from './core/context.js'
import { MetamodelCache } from './metamodel/service.js'
import { metamodelRoutes } from './metamodel/routes.js'
import { assetRoutes } from './assets/routes.js'
import { openapiRoutes, typedOpenapiRoutes, OPENAPI_INFO } from './openapi/routes.js'
import { transformDocument, transformRoute } from './openapi/operations.js'
import { LIST_FILTER_COLUMNS } from './query/fields.js'
import { apiKeyRoutes, directoryRoutes } from './admin/routes.js'
import { createRateLimiter, enforceRateLimit, type RateLimiter } from './core/rate-limit.js'
import { readFileSync } from 'node:fs'
import { requestIdOptions } from './ops/request-id.js'
import { registerOps } from './ops/http.js'
import { registerReadRouting } from './ops/read-routing.js'
import type { ReadRouting } from './store/replica.js'
import { registerIdempotency } from './idempotency/hooks.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Db
    config: Config
    metamodels: MetamodelCache
    authenticator: Authenticator
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

export { INVALIDATE_CHANNEL } from './core/channels.js'
import { INVALIDATE_CHANNEL } from './core/channels.js'

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
    // 431, a malformed request line, a slow client: answered in the envelope (core/http-layer.ts).
    clientErrorHandler,
    // Errors the router raises before any route runs, in the same envelope as every other error.
    frameworkErrors: (error, _request, reply) => {
      if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return sendError(reply, new AppError(Errors.NOT_FOUND, 'a path segment is longer than any id or composite key can be'))
      if (error.code === 'FST_ERR_BAD_URL') return sendError(reply, new AppError(Errors.INVALID_REQUEST, 'the URL is malformed: each % must start an escape of UTF-8 (%XX, two hex digits); write a literal % as %25'))
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
  const rateLimiter = options.rateLimiter ?? createRateLimiter(db, config, (err) => app.log.warn({ err }, 'rate-limit store unavailable; counting in process'))
  const readRouting = options.readRouting !== undefined ? options.readRouting : await openReadRoutingFor(db, config, app)
  const storeFor = registerReadRouting(app, readRouting, db)
  app.decorate('requestContext', async (request: FastifyRequest): Promise<RequestContext> => ({
    db: await storeFor(request),
    auth: request.auth,
    metamodel: await metamodels.get(request.auth.orgId),
    ...(request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : {}),
  }))
  app.decorateRequest('auth', null as never)

  // A setup change anywhere (this process, another server, the CLI) empties the caches.
  await db.listen(INVALIDATE_CHANNEL, (orgId) => {
    metamodels.invalidate(orgId || undefined)
    authenticator.invalidate()
  })
  registerStatistics(app, db)
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

  await app.register(async (api) => {
    await api.register(openapiRoutes)
    // The interactive API reference (Swagger UI, its assets served from node_modules), no key needed.
    await api.register(swaggerUi, { routePrefix: '/docs', indexPrefix: '/api/v1', uiConfig: { deepLinking: true, persistAuthorization: false } })
    await api.register(async (authed) => {
      authed.addHook('onRequest', async (request) => {
        request.auth = await authenticator.authenticate(request)
      })
      // After authentication: only requests of a known organization count against its quota.
      authed.addHook('onRequest', async (request, reply) => enforceRateLimit(rateLimiter, request, reply))
      registerIdempotency(authed, db)
      await authed.register(metamodelRoutes)
      await authed.register(assetRoutes)
      await authed.register((await import('./relationships/routes.js')).relationshipRoutes)
      await authed.register(apiKeyRoutes)
      await authed.register(directoryRoutes)
      await authed.register(typedOpenapiRoutes)
      await authed.register((await import('./bulk/routes.js')).bulkRoutes)
      await authed.register((await import('./search/routes.js')).searchRoutes)
      await authed.register((await import('./export/routes.js')).exportRoutes)
    })
  }, { prefix: '/api/v1' })

  return app
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
    onReplicaDown: (err) => app.log.warn({ err }, 'read replica unavailable; reading from the primary for a while'),
  })
}
