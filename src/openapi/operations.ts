import type { FastifySchema } from 'fastify'
import { WRITE_METHODS } from '../core/writes.js'
import { errorEnvelopeSchema } from '../core/schemas.js'
import { dryRunEnvelope } from '../request/dry-run.js'

/**
 * What the generated OpenAPI documents add to the route schemas so that a generated client is
 * usable without casts: an `operationId` per operation, and every query parameter named — the
 * `filter[...]`/`relationships_filter[...]` families that routes validate with patternProperties
 * (which @fastify/swagger leaves out) become explicit parameters, and the open-ended
 * `filter[properties.<key>]` a `filter` deepObject parameter.
 */

/** `GET /api/v1/assets/{id}` → `getAssetsById`; `POST /api/v1/bulk/assets` → `postBulkAssets`. */
export function operationIdOf(method: string, url: string): string {
  const words = url
    .replace(/^\/api\/v1\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      const param = /^[{:](\w+)}?$/.exec(segment)
      return param ? `By_${param[1]}` : segment
    })
    .flatMap((segment) => segment.split(/[^A-Za-z0-9]+/))
    .filter(Boolean)
  return [method.toLowerCase(), ...words.map((w) => w[0]!.toUpperCase() + w.slice(1))].join('')
}

/**
 * The literal names a pattern such as `^relationships_filter\[(a|b\.c)\]$` (or one name,
 * `^relationships_filter\[direction\]$`) stands for, or null when open-ended.
 */
export function namesOfPattern(pattern: string): string[] | null {
  const match = /^\^(\w+)\\\[(?:\(([\w|.\\]+)\)|([\w.\\]+))\\\]\$$/.exec(pattern)
  if (!match) return null
  return (match[2] ?? match[3]!).split('|').map((name) => `${match[1]}[${name.replaceAll('\\.', '.')}]`)
}

type Json = Record<string, any>

/** The querystring schema as documented: pattern families made explicit (validation is unchanged: routes keep their own schema). */
function documentedQuery(query: Json, explicit: Record<string, readonly string[]>): Json {
  const properties: Json = { ...(query.properties ?? {}) }
  for (const [pattern, schema] of Object.entries<Json>(query.patternProperties ?? {})) {
    const names = namesOfPattern(pattern) ?? (pattern.startsWith('^filter') ? (explicit.filter ?? []).map((field) => `filter[${field}]`) : [])
    for (const name of names) {
      properties[name] ??= { type: schema.type ?? 'string', ...(schema.enum ? { enum: schema.enum } : {}), description: `Equality filter on ${name.slice(name.indexOf('[') + 1, -1)}.` }
    }
  }
  const { patternProperties: _, ...rest } = query
  return { ...rest, properties }
}

/** @fastify/swagger's `transform`: an operationId per route, explicit query parameters. */
export function transformRoute(listFilterColumns: { assets: readonly string[]; relationships: readonly string[] }) {
  return ({ schema, url, route }: { schema: FastifySchema; url: string; route: { method: string | string[] } }) => {
    if (!schema || (schema as { hide?: boolean }).hide) return { schema, url }
    const method = Array.isArray(route.method) ? route.method[0]! : route.method
    const out: Json = { ...schema, operationId: (schema as Json).operationId ?? operationIdOf(method, url) }
    const query = (schema as Json).querystring as Json | undefined
    // A route that takes no parameter (its schema refuses every one) documents none.
    if (query && !query.patternProperties && Object.keys(query.properties ?? {}).length === 0) delete out.querystring
    if (query?.patternProperties) {
      const filter = url.includes('/relationships') && !url.includes('/assets') ? listFilterColumns.relationships : listFilterColumns.assets
      out.querystring = documentedQuery(query, { filter })
    }
    // A single created resource is named by Location (docs/decisions/0006); bulk creates carry none.
    const created = (schema as Json).response?.[201] as Json | undefined
    if (created && !url.includes('/bulk/')) {
      out.response = { ...(schema as Json).response, 201: { ...created, headers: { Location: LOCATION_HEADER } } }
    }
    if (out.response && WRITE_METHODS.has(method) && url.startsWith('/api/v1/')) out.response = writeResponses(out.response as Json, query)
    return { schema: out as FastifySchema, url }
  }
}

/**
 * What every write under /api/v1 may answer besides its own statuses: the Idempotency-Key's 409
 * and 422 (CONTRACT §16: any POST, PATCH, PUT or DELETE, searches and analytics included), 413
 * for a body over the limit (a body-less write reads one too, to refuse it), and with
 * `?dry_run=true` the dry run's 200 beside the record a PATCH or PUT answers.
 */
function writeResponses(response: Json, query: Json | undefined): Json {
  const out: Json = { ...response }
  const add = (status: number, code: string, description: string) => {
    const given = out[status] as Json | undefined
    out[status] = given === undefined
      ? { ...errorEnvelopeSchema, description }
      : { ...given, description: `${given.description ?? ''}${given.description ? '; ' : ''}${code}: ${description}` }
  }
  add(409, 'idempotency_key_in_use', 'a request with the same Idempotency-Key is still running (idempotency_key_in_use)')
  add(422, 'idempotency_key_reused', 'the Idempotency-Key was used with another body (idempotency_key_reused)')
  out[413] ??= { ...errorEnvelopeSchema, description: 'Body over the byte limit (payload_too_large)' }
  const ok = out[200] as Json | undefined
  if (ok !== undefined && query?.properties?.dry_run !== undefined && ok !== dryRunEnvelope) {
    const { description, ...record } = ok
    out[200] = { description, oneOf: [record, dryRunEnvelope] }
  }
  return out
}

const LOCATION_HEADER = {
  type: 'string',
  description: 'The created resource: /api/v1/<collection>/<id>, prefixed by KBIS_PUBLIC_URL when it is set.',
}

/** The `filter` deepObject parameter of asset lists: `filter[properties.<key>]=value`. */
const PROPERTY_FILTER = {
  name: 'filter',
  in: 'query',
  style: 'deepObject',
  explode: true,
  required: false,
  description: 'Equality filters on properties: `filter[properties.<key>]=value` (any other `filter[...]` field is listed as its own parameter).',
  schema: { type: 'object', additionalProperties: { type: 'string' } },
  // Swagger UI's "Try it out" fills a parameter without an example with a made-up one
  // (`filter[additionalProp1]=string`), which the list refuses (400): none by default.
  example: {},
}

/**
 * The headers answers carry besides `Location` (components/headers). Set outside the routes (the
 * request id in src/ops/http.ts, the quota in core/rate-limit.ts, a replay in
 * idempotency/hooks.ts, Retry-After with the 429 and 503 that give it), so declared here, on the
 * responses that carry them, once for every operation.
 */
const RESPONSE_HEADERS = {
  'X-Request-Id': {
    description: 'The request id: the X-Request-Id sent when it matches ^[A-Za-z0-9._-]{1,64}$, else a new UUID; error envelopes (meta.request_id), log lines and events carry the same.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': {
    description: "The organization's quota: requests per window. On every answer to a request whose API key was recognized (not a 401 for a missing, unknown or inactive key, nor the 503 of a server shutting down).",
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window (this one counted). On the answers that carry RateLimit-Limit.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': {
    description: 'Seconds until the current window ends (windows are fixed). On the answers that carry RateLimit-Limit.',
    schema: { type: 'integer', minimum: 1 },
  },
  'Retry-After': {
    description: 'Seconds to wait before sending the request again: with every 429 (rate_limit_exceeded), with a 503 service_unavailable (not query_timeout), and with a 409 idempotency_key_in_use whose first request is still running (not with the one whose first request wrote its changes and lost its answer, which is never run again).',
    schema: { type: 'integer', minimum: 1 },
  },
  'WWW-Authenticate': {
    description: 'Bearer: with every 401 (unauthorized, api_key_inactive), the scheme the API takes.',
    schema: { type: 'string', enum: ['Bearer'] },
  },
  'Idempotent-Replayed': {
    description: 'true: the answer of an earlier request with the same Idempotency-Key, sent again; nothing was written. Absent on every other answer.',
    schema: { type: 'string', enum: ['true'] },
  },
} as const

type HeaderName = keyof typeof RESPONSE_HEADERS
const headerRef = (name: HeaderName): Json => ({ $ref: `#/components/headers/${name}` })

/**
 * Which of {@link RESPONSE_HEADERS} a response of an operation carries. Every answer has its
 * request id. The quota's headers: every answer of an operation that takes a key (the others
 * declare `security: []`). A replay: the answers of a write that takes an Idempotency-Key that are
 * kept for a repeat, which are all but 5xx and 429 (not kept) and 413 (the body is read before
 * the key is claimed).
 */
function headersOf(operation: Json, status: string): HeaderName[] {
  const names: HeaderName[] = ['X-Request-Id']
  // The HTTP layer's 431 is answered before any key is read.
  if (!(Array.isArray(operation.security) && operation.security.length === 0) && status !== '431') names.push('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset')
  if (status === '401') names.push('WWW-Authenticate')
  const idempotent = (operation.parameters as Json[] | undefined)?.some((p) => p.in === 'header' && String(p.name).toLowerCase() === 'idempotency-key')
  if (status === '429' || status === '503' || (idempotent && status === '409')) names.push('Retry-After')
  if (idempotent && Number(status) < 500 && !['429', '413', '431'].includes(status)) names.push('Idempotent-Replayed')
  return names
}

/**
 * What any operation may answer besides the statuses its route declares (CONTRACT §1: every
 * answer, the HTTP layer's included, uses the error envelope): a header block too large, refused
 * before the request reaches the API, and an unexpected failure.
 */
const ANY_OPERATION_ERRORS: Record<string, string> = {
  431: 'The request line and headers are larger than the server accepts, 16 KiB (headers_too_large); answered before the request reaches the API',
  500: 'An unexpected failure (internal_error), never with a stack trace or SQL in the body',
}

const errorResponse = (description: string): Json => ({
  description,
  content: { 'application/json': { schema: { ...errorEnvelopeSchema, description } } },
})

/** Every response with the headers it carries (new objects: responses may be shared between operations). */
function declareResponseHeaders(openapiObject: Json): void {
  openapiObject.components = { ...openapiObject.components, headers: { ...openapiObject.components?.headers, ...RESPONSE_HEADERS } }
  for (const item of Object.values<Json>(openapiObject.paths ?? {})) {
    for (const operation of Object.values<Json>(item)) {
      if (!operation?.responses) continue
      for (const [status, description] of Object.entries(ANY_OPERATION_ERRORS)) operation.responses[status] ??= errorResponse(description)
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        const headers = Object.fromEntries(headersOf(operation, status).map((name) => [name, headerRef(name)]))
        operation.responses[status] = { ...response, headers: { ...response.headers, ...headers } }
      }
    }
  }
}

/** POST routes whose body is optional: none is an empty search, or a count of every asset. */
const OPTIONAL_BODIES = ['/api/v1/search/assets', '/api/v1/search/relationships', '/api/v1/analytics/assets']

/**
 * @fastify/swagger's `transformObject`: the `filter` deepObject parameter where assets are
 * filtered by property, and the response headers.
 */
export function transformDocument(document: { openapiObject: Partial<Json> } | { swaggerObject: Partial<Json> }): Json {
  const openapiObject = ('openapiObject' in document ? document.openapiObject : document.swaggerObject) as Json
  declareResponseHeaders(openapiObject)
  // @fastify/swagger marks every body required; these routes read no body as `{}` (docs/search.md).
  for (const path of OPTIONAL_BODIES) {
    const body = (openapiObject.paths as Json | undefined)?.[path]?.post?.requestBody as Json | undefined
    if (body) body.required = false
  }
  for (const item of Object.values<Json>(openapiObject.paths ?? {})) {
    for (const operation of Object.values<Json>(item)) {
      const parameters = operation?.parameters as Json[] | undefined
      if (!parameters) continue
      // The asset lists (GET /assets, GET /export/assets) take every field of an asset as a filter,
      // `name` among them; the property definitions' list takes filter[asset_type_key] alone.
      const named = (name: string) => parameters.some((p) => p.in === 'query' && p.name === name)
      if (!named('filter[asset_type_key]') || !named('filter[name]')) continue
      if (!parameters.some((p) => p.name === 'filter')) parameters.push(PROPERTY_FILTER)
    }
  }
  return openapiObject
}
