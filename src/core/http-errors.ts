import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, Errors, errorBody, type ErrorDef, type Issue } from './errors.js'
import { DISK_FULL, READ_ONLY, isPgError, mapPgError } from './pg-errors.js'
import { isStoreUnreachable } from '../store/unreachable.js'
import { escapePointer } from './json.js'
import { discardBody } from './http-layer.js'
import { writes } from './writes.js'
import { answerOwed } from './cut-off.js'

interface AjvError {
  keyword: string
  instancePath: string
  message?: string
  params: Record<string, unknown>
}

/** Query parameters whose errors carry their own code (CONTRACT §1). */
export function queryErrorDef(parameter: string): ErrorDef {
  if (parameter.startsWith('page') || parameter.startsWith('relationships_page')) return Errors.INVALID_PAGE
  if (parameter === 'sort' || parameter === 'relationships_sort') return Errors.INVALID_SORT
  if (parameter === 'include') return Errors.INVALID_INCLUDE
  if (parameter.startsWith('filter') || parameter.startsWith('relationships_filter')) return Errors.INVALID_FILTER
  return Errors.INVALID_REQUEST
}

const ARTICLE: Record<string, string> = { object: 'an object', array: 'an array', integer: 'an integer', string: 'a string', number: 'a number', boolean: 'a boolean', null: 'null' }

/** `3.properties.x` → `item 3: properties.x` when the body is a bulk array; the body itself is "the body". */
function subject(where: string): string {
  if (where === '') return 'the body'
  const item = /^(\d+)(?:\.(.*))?$/.exec(where)
  if (!item) return where
  return item[2] === undefined ? `item ${item[1]}` : `item ${item[1]}: ${item[2]}`
}

function describe(error: AjvError, where: string): string {
  const params = error.params
  switch (error.keyword) {
    case 'additionalProperties': {
      const owner = subject(where)
      return `unknown field ${JSON.stringify(String(params.additionalProperty))}${where ? ` in ${owner}` : ''}`
    }
    case 'required':
      return `${subject(where ? `${where}.${String(params.missingProperty)}` : String(params.missingProperty))} is required`
    case 'enum':
      return `${where ? subject(where) : 'value'} must be one of ${(params.allowedValues as unknown[]).join(', ')}`
    case 'type': {
      const types = String(params.type).split(',')
      return `${subject(where)} must be ${types.map((t) => ARTICLE[t] ?? t).join(' or ')}`
    }
    case 'uniqueItems':
      // Ajv says "must NOT have duplicate items (items ## 1 and 0 are identical)": `j` is the later one.
      return `${where ? subject(where) : 'value'} must not list the same value twice (entries ${String(params.i)} and ${String(params.j)} are equal)`
    case 'minLength':
      if (params.limit === 1) return `${where ? subject(where) : 'value'} must not be empty`
      return `${where ? subject(where) : 'value'} must be at least ${String(params.limit)} characters long`
    default:
      return `${where ? subject(where) : 'value'} ${error.message ?? 'is not valid'}`
  }
}

/**
 * Ajv errors of a route schema → the CONTRACT envelope. Unknown fields are 400, bad values 422.
 * `known`: the route's query parameters, when the error is about the query string.
 */
export function validationError(errors: AjvError[], context: string, known?: readonly string[], query?: unknown): AppError {
  if (context === 'querystring' || context === 'params') {
    const first = errors[0]!
    const parameter =
      first.keyword === 'additionalProperties'
        ? String(first.params.additionalProperty)
        : first.instancePath.replace(/^\//, '').split('/')[0] ?? ''
    // An unknown `filter[x]` is a filter error, an unknown `page[x]` a page error, where the route
    // takes filters or pages (a misspelt member); any other unknown parameter is a malformed
    // request (`page[size]` on POST /search/assets, whose page is in the body).
    const family = queryErrorDef(parameter)
    const takesFamily = first.keyword !== 'additionalProperties' || known === undefined || known.some((name) => queryErrorDef(name) === family)
    const def = takesFamily ? family : Errors.INVALID_REQUEST
    // `page[size]=1&page[size]=2` reaches the schema as an array: "must be an integer" of a
    // parameter sent as one would not tell what is wrong.
    const repeated = first.keyword === 'type' ? (query as Record<string, unknown> | undefined)?.[parameter] : undefined
    const detail =
      first.keyword === 'additionalProperties'
        ? def === Errors.INVALID_FILTER
          ? `unknown filter field ${parameter}`
          : `unknown query parameter ${parameter}`
        : Array.isArray(repeated)
          ? `${parameter} is given ${repeated.length} times; send it once`
          : describe(first, parameter)
    return new AppError(def, [{ detail, parameter }])
  }
  const all = bodyIssues(errors)
  const unknownField = all.some((issue) => issue.def === Errors.INVALID_REQUEST)
  const def = unknownField ? Errors.INVALID_REQUEST : Errors.VALIDATION_FAILED
  const issues = all.filter((issue) => issue.def === def).map(({ def: _, ...issue }) => issue)
  return new AppError(def, issues.length > 0 ? issues : [{ detail: 'the body is not valid', pointer: '' }])
}

/**
 * Every schema error of a body as an issue with a pointer and its own kind: an unknown member is
 * a malformed request (400 invalid_request), anything else (a wrong type or value, a missing
 * member) invalid data (422 validation_failed).
 */
export function bodyIssues(errors: AjvError[]): (Issue & { def: ErrorDef })[] {
  return errors
    .filter((e) => !['if', 'anyOf', 'oneOf'].includes(e.keyword))
    .map((e) => {
      const pointer =
        e.keyword === 'additionalProperties'
          ? `${e.instancePath}/${escapePointer(String(e.params.additionalProperty))}`
          : e.keyword === 'required'
            ? `${e.instancePath}/${escapePointer(String(e.params.missingProperty))}`
            // The repeated item, not the list: Ajv names the later of two equal items `j`.
            : e.keyword === 'uniqueItems' && typeof e.params.j === 'number'
              ? `${e.instancePath}/${e.params.j}`
              : e.instancePath
      const where = e.instancePath.replace(/^\//, '').replaceAll('/', '.')
      // A body that is not an object at all (an array, null, a string) is malformed, as an
      // unknown member is (docs/errors.md); its pointer is the document's, "" (RFC 6901).
      const malformed = e.keyword === 'additionalProperties' || (e.keyword === 'type' && e.instancePath === '')
      return { detail: describe(e, where), pointer, def: malformed ? Errors.INVALID_REQUEST : Errors.VALIDATION_FAILED }
    })
}

/**
 * A route's body failures by where they are: `[pointer prefix, code, reader?]`, the longest prefix
 * wins (route option `config.bodyErrorCodes`; the search bodies use it). Elsewhere invalid_request.
 * A member with a reader of its own (the search filter's parser) is reported in the reader's
 * words: when the first failure is in that member, the reader is run on the body, and the AppError
 * it throws is the answer.
 */
export type BodyErrorCodes = readonly (readonly [prefix: string, def: ErrorDef, reader?: (body: unknown) => unknown])[]

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Codes of the body's failures by member (see BodyErrorCodes). */
    bodyErrorCodes?: BodyErrorCodes
  }
}

/** Ajv errors of a body whose members have codes of their own: the first failure's code, every failure with it. */
export function codedBodyError(errors: AjvError[], codes: BodyErrorCodes, body: unknown): AppError {
  const issues = errors
    .filter((e) => !['if', 'anyOf', 'oneOf'].includes(e.keyword))
    .map((e) => {
      const member = e.keyword === 'additionalProperties' ? String(e.params.additionalProperty) : e.keyword === 'required' ? String(e.params.missingProperty) : null
      const pointer = member === null ? e.instancePath : `${e.instancePath}/${escapePointer(member)}`
      // An unknown member is an error of the object it is in: `/page/x` is a page error, `/x` a malformed request.
      const at = e.keyword === 'additionalProperties' ? e.instancePath : pointer
      const match = codes.filter(([prefix]) => at === prefix || at.startsWith(`${prefix}/`)).sort((a, b) => b[0].length - a[0].length)[0]
      return { def: match?.[1] ?? Errors.INVALID_REQUEST, pointer, detail: describe(e, e.instancePath.replace(/^\//, '').replaceAll('/', '.')), match }
    })
  const reader = issues[0]?.match?.[2]
  if (reader !== undefined) {
    try {
      reader(body)
    } catch (err) {
      if (err instanceof AppError) return err
      throw err
    }
  }
  const def = issues[0]?.def ?? Errors.INVALID_REQUEST
  // One failure per place (a null where an enum is expected fails both `type` and `enum`): the first.
  const places = new Set<string>()
  const same = issues.filter((issue) => !places.has(issue.pointer) && places.add(issue.pointer) && issue.def === def).map(({ def: _, match: __, ...issue }) => issue)
  return new AppError(def, same.length > 0 ? same : [{ detail: 'the body is not valid', pointer: '' }])
}

/** The query parameters a route takes: its query-string schema's properties, and the patterns of its families (`^filter\\[…`). */
export function queryNames(request: FastifyRequest): string[] {
  const query = request.routeOptions.schema?.querystring as { properties?: object; patternProperties?: object } | undefined
  return [...Object.keys(query?.properties ?? {}), ...Object.keys(query?.patternProperties ?? {}).map((pattern) => pattern.replace(/^\^/, ''))]
}

/** Whether `err` is the failure of the request's own body stream (a client that left mid-body). */
function isBodyCutOff(err: unknown, request: FastifyRequest): boolean {
  return err !== null && request.raw.errored === err
}

function toAppError(err: FastifyError, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err
  const validation = (err as { validation?: AjvError[] }).validation
  const context = (err as { validationContext?: string }).validationContext ?? 'body'
  const codes = request.routeOptions.config?.bodyErrorCodes
  if (validation && context === 'body' && codes) return codedBodyError(validation, codes, request.body)
  if (validation) return validationError(validation, context, queryNames(request), request.query)
  // The client left while sending its body (or the server cut its connection at the end of a
  // shutdown): the request's own stream failed, nothing of the store. Its line and metrics say
  // so; the answer goes nowhere. (Node names that error ECONNRESET, as a socket to PostgreSQL
  // that broke, so it is told apart before the store's errors.)
  if (isBodyCutOff(err, request)) return new AppError(Errors.INVALID_REQUEST, 'the request ended before its body was complete')
  const mapped = mapPgError(err)
  if (mapped?.def === Errors.QUERY_TIMEOUT && writes(request)) {
    // A write that runs that long mostly waits for another one's lock: narrowing a filter is no help.
    return new AppError(Errors.QUERY_TIMEOUT, "the write ran longer than the server's statement timeout (waiting for another write to the same records, or too large) and wrote nothing; retry it later, or send fewer items")
  }
  if (mapped) return mapped
  // The database is down or out of reach: a client may retry (the operator is told in the log).
  if (isStoreUnreachable(err)) return new AppError(Errors.SERVICE_UNAVAILABLE, 'the database cannot be reached; retry later', { 'Retry-After': '5' })
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError(Errors.INVALID_REQUEST, 'the body is not valid JSON')
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError(Errors.PAYLOAD_TOO_LARGE, `the body is larger than ${request.routeOptions.bodyLimit ?? 'the limit of'} bytes`)
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      // Every body is read as JSON (core/http-input.ts); a malformed Content-Type header lands here.
      return new AppError(Errors.INVALID_REQUEST, 'the body must be JSON (Content-Type: application/json)')
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError(Errors.INVALID_REQUEST, 'the Content-Length does not match the body')
    default:
      break
  }
  if (err.name === 'SyntaxError' || (typeof err.statusCode === 'number' && err.statusCode === 400)) {
    return new AppError(Errors.INVALID_REQUEST, 'the request is malformed')
  }
  return new AppError(Errors.INTERNAL_ERROR, 'an internal error occurred; it has been logged')
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value)
  if (err.def === Errors.UNAUTHORIZED || err.def === Errors.API_KEY_INACTIVE) reply.header('WWW-Authenticate', 'Bearer')
  // The request id (CONTRACT §17) lets a client quote the failing request; set here too for the
  // errors the router raises before any hook runs.
  reply.header('X-Request-Id', reply.request.id)
  // As on every answer (ops/http.ts), here too for those refused before that hook ran (core/http-layer.ts).
  reply.header('Cache-Control', 'no-store')
  const body = errorBody(err)
  for (const entry of body.errors) entry.meta = { ...(entry.meta as Record<string, unknown> | undefined), request_id: reply.request.id }
  return reply.code(err.status).type('application/json; charset=utf-8').send(body)
}

/**
 * Whether the store's error is the shutdown's doing: past KBIS_SHUTDOWN_TIMEOUT the server
 * cancels the statements still running and closes their connections (server.ts), which the
 * request sees as a store gone away (PostgreSQL: a closed connection or a cancelled statement;
 * PGlite: 57P01), not as a fault of the store, of the request or of the code.
 */
function cutOffByShutdown(err: FastifyError, request: FastifyRequest): boolean {
  return request.server.lifecycle?.cuttingOff === true && (isStoreUnreachable(err) || isPgError(err, '57014'))
}

/** The one error handler: AppError as is, schema errors with pointers, anything else 500. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    if (cutOffByShutdown(err, request)) {
      // The connection is closed already, mostly: this answer goes where it still can.
      if (answerOwed(request)) {
        request.log.warn({ cause: err.message }, 'request cut off by the shutdown timeout (KBIS_SHUTDOWN_TIMEOUT) after its changes were committed')
        return sendError(reply, new AppError(Errors.SERVICE_UNAVAILABLE, 'the server shut down after this request\'s changes were committed, before its answer was complete: they are written; read them before sending it again', { 'Retry-After': '5' }))
      }
      request.log.warn({ cause: err.message }, 'request cut off by the shutdown timeout (KBIS_SHUTDOWN_TIMEOUT); its transaction was rolled back')
      return sendError(reply, new AppError(Errors.SERVICE_UNAVAILABLE, 'the server shut down before this request was done, and wrote nothing of it; retry it', { 'Retry-After': '5' }))
    }
    const appError = toAppError(err, request)
    if (appError.def === Errors.INTERNAL_ERROR) request.log.error({ err }, 'unhandled error')
    else if (appError.def === Errors.SERVICE_UNAVAILABLE && isStoreUnreachable(err)) request.log.error({ err }, 'the database cannot be reached')
    else if (isPgError(err, DISK_FULL)) request.log.error({ err }, 'the store is out of disk space')
    else if (isPgError(err, READ_ONLY)) request.log.error({ err }, 'the database is read-only: DATABASE_URL must name a primary that takes writes')
    // The client receives the 413 only if it may finish sending first (core/http-layer.ts).
    if (appError.def === Errors.PAYLOAD_TOO_LARGE) await discardBody(request.raw)
    return sendError(reply, appError)
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new AppError(Errors.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`)),
  )
}
