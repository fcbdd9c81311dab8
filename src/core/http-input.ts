import { isUtf8 } from 'node:buffer'
import { createHash } from 'node:crypto'
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import { AppError, Errors, type Issue } from './errors.js'
import { escapePointer } from './json.js'
import { unstorableValues } from './json-values.js'
import { queryErrorDef, queryNames, validationError } from './http-errors.js'
import { errorEnvelopeSchema } from './schemas.js'
import { itemIndexOf, withItemMeta } from './items.js'
import { WRITE_METHODS } from './writes.js'


const NUL_IN_URL = 'text must not contain NUL (U+0000) characters'

/** The query parameter (its name, decoded, NULs left out) whose text holds an escaped NUL; null when it is in the path. */
function nulParameter(url: string): string | null {
  const query = url.indexOf('?')
  const pair = query < 0 ? undefined : url.slice(query + 1).split('&').find((p) => /%00/i.test(p))
  if (pair === undefined) return null
  const name = pair.split('=')[0]!.replaceAll('+', ' ')
  try {
    return decodeURIComponent(name).replaceAll('\u0000', '')
  } catch {
    return name
  }
}

/** What a % must start in a URL, for the refusals of a path (app.ts) and of a query string. */
export const ESCAPE_RULE = 'each % must start an escape of UTF-8 (%XX, two hex digits); write a literal % as %25'

const BAD_ESCAPE = `the query string is malformed: ${ESCAPE_RULE}`

/**
 * The query-string parameter (its name as far as it decodes) whose percent-escapes are not UTF-8
 * (`%ZZ`, `%FF`, a cut sequence), or undefined when every one decodes. The parser would read them
 * as `%ZZ` or U+FFFD: a filter on another value than the one sent.
 */
function badlyEscapedParameter(url: string): { name: string | null } | undefined {
  const start = url.indexOf('?')
  if (start < 0 || !url.includes('%', start)) return undefined
  for (const pair of url.slice(start + 1).split('&')) {
    const [name = '', value = ''] = pair.split(/=(.*)/s)
    const decoded = decodes(name)
    if (decoded === null) return { name: null }
    if (decodes(value) === null) return { name: decoded }
  }
  return undefined
}

function decodes(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '))
  } catch {
    return null
  }
}

const NOT_UTF8 = 'the body is not UTF-8 text: JSON is sent as UTF-8 (RFC 8259); convert it, or escape other characters as \\uXXXX'

const POISON_DETAIL = 'keys named "__proto__" (or "constructor" holding "prototype") are not accepted'

/**
 * The keys of a body Fastify's parser refused as poisoned (`__proto__`, `constructor` holding
 * `prototype`), with their pointers, and the body as JSON.parse reads it (those keys as own
 * members); null when the body is not JSON at all.
 */
function poisonedKeys(body: string): { root: unknown; issues: Issue[] } | null {
  let root: unknown
  try {
    root = JSON.parse(body)
  } catch {
    return null
  }
  const issues: Issue[] = []
  const stack: { value: unknown; pointer: string }[] = [{ value: root, pointer: '' }]
  while (stack.length > 0) {
    const { value, pointer } = stack.pop()!
    if (value === null || typeof value !== 'object') continue
    const children: { value: unknown; pointer: string }[] = []
    for (const [key, child] of Object.entries(value)) {
      const at = `${pointer}/${escapePointer(key)}`
      const poisoned = !Array.isArray(value) && (key === '__proto__' || (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype')))
      if (poisoned) issues.push({ detail: POISON_DETAIL, pointer: at })
      else children.push({ value: child, pointer: at })
    }
    // Walked first to last, so the first key refused is the first one written in the body.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!)
  }
  return { root, issues }
}

/**
 * The refusal of a poisoned body: its keys with their pointers (in a bulk body, every one with its
 * item; an array sent to a route that takes no items is no list of items, and gets the first).
 */
function poisonedRefusal({ root, issues }: { root: unknown; issues: Issue[] }, ofItems: boolean): AppError {
  if (issues.length === 0) return new AppError(Errors.INVALID_REQUEST, POISON_DETAIL)
  // withItemMeta orders a bulk's issues by item.
  return ofItems && Array.isArray(root) ? withItemMeta(new AppError(Errors.INVALID_REQUEST, issues), root) : new AppError(Errors.INVALID_REQUEST, [issues[0]!])
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The body is an array of items each checked on its own (the bulk routes): an item holding a
     * value the parser refuses is set aside (setItemsAside) instead of refusing the body at once.
     */
    bodyOfItems?: boolean
  }
}

/** The items of a bulk body the parser set aside: their refusals, and a digest of the bytes sent. */
const setAside = new WeakMap<FastifyRequest, { issues: Issue[]; digest: string }>()

/**
 * The refusals (400 invalid_request, with pointers and item meta) of the items the parser set
 * aside; the bulk routes list them with every other failing item (CONTRACT §1).
 */
export function setAsideIssues(request: FastifyRequest): readonly Issue[] {
  return setAside.get(request)?.issues ?? []
}

/** A digest of the bytes of a body with items set aside (they are null in the parsed body): part of its Idempotency-Key fingerprint. */
export function setAsideDigest(request: FastifyRequest): string | undefined {
  return setAside.get(request)?.digest
}

/**
 * A bulk body whose items hold values the store cannot take, or poisoned keys: each such item
 * becomes null, so that nothing of it reaches a check or the store, and its refusals are kept
 * for the route (setAsideIssues). The other items go on to every check. Null when a refusal
 * points outside any item: then the body is refused as a whole.
 */
function setItemsAside(request: FastifyRequest, digest: string, root: unknown[], issues: readonly Issue[]): unknown[] | null {
  const indexes = new Set<number>()
  for (const issue of issues) {
    const index = itemIndexOf(issue.pointer)
    if (index === null) return null
    indexes.add(index)
  }
  const kept = setAside.get(request)?.issues ?? []
  setAside.set(request, { issues: [...kept, ...withItemMeta(new AppError(Errors.INVALID_REQUEST, [...issues]), root).issues], digest })
  return root.map((item, index) => (indexes.has(index) ? null : item))
}

/**
 * A body the parser refused (not JSON, not UTF-8, a value PostgreSQL cannot store), kept as the
 * request's body until its Idempotency-Key is claimed (idempotency/hooks.ts), then thrown
 * (registerRouteGuards's preValidation hook): the refusal, a 400 like any other, is stored and
 * replayed (CONTRACT §16: every completed answer but 5xx and 429). Its fingerprint is a digest of
 * the bytes sent, so another malformed body is another request.
 */
export class RefusedBody {
  constructor(readonly error: Error, private readonly digest: string) {}

  toJSON(): unknown {
    return { refused_body_sha256: this.digest }
  }
}

const CONSOLE_URL = /^\/console(\/|\?|$)/
// The probes ignore a query string, which some load balancers and orchestrators add (docs/errors.md).
const PROBE_URL = /^\/(healthz|readyz)(\?|$)/

/** 400 invalid_request for a URL with an escaped NUL or a percent-escape that is not UTF-8. */
export function refuseBrokenUrl(url: string): void {
  if (/%00/i.test(url)) {
    const parameter = nulParameter(url)
    throw new AppError(Errors.INVALID_REQUEST, [parameter === null ? { detail: NUL_IN_URL } : { detail: NUL_IN_URL, parameter }])
  }
  const bad = badlyEscapedParameter(url)
  if (bad) throw new AppError(Errors.INVALID_REQUEST, [bad.name === null ? { detail: BAD_ESCAPE } : { detail: BAD_ESCAPE, parameter: bad.name }])
}

/** Whether a refused body waits for the Idempotency-Key's claim: a write of the API that carries one. */
function defersRefusal(request: FastifyRequest): boolean {
  return WRITE_METHODS.has(request.method) && request.headers['idempotency-key'] !== undefined && request.url.startsWith('/api/v1/')
}

// RFC 9110 tokens, as Fastify checks a Content-Type's type and subtype (lib/content-type.js).
const MEDIA_TYPE_NAME = /^[\w!#$%&'*+.^`|~-]+$/
const MEDIA_SUBTYPE_NAME = /^[\w!#$%&'*+.^`|~-]+\s*$/

/** Whether a Content-Type header holds a media type (`type/subtype`, then parameters) Fastify takes. */
function isMediaType(value: string): boolean {
  const semicolon = value.indexOf(';')
  const media = semicolon === -1 ? value : value.slice(0, semicolon)
  const slash = media.indexOf('/')
  return slash !== -1 && MEDIA_TYPE_NAME.test(media.slice(0, slash).trimStart()) && MEDIA_SUBTYPE_NAME.test(media.slice(slash + 1).trimEnd())
}

/** The body's content coding when it has one (`identity`, or none, is no coding), as sent. */
function encodingOf(request: FastifyRequest): string | null {
  const header = request.headers['content-encoding']
  const value = (Array.isArray(header) ? header.join(', ') : header ?? '').trim()
  return value === '' || value.toLowerCase() === 'identity' ? null : value.slice(0, 100)
}

/**
 * Values PostgreSQL cannot store are refused at the door (400 invalid_request with a pointer)
 * instead of failing deep inside a statement (500) or being stored as something else.
 */
export function registerInputGuards(app: FastifyInstance): void {
  // The console's pages check their URLs in the console's own scope, after its browser hardening
  // (console/plugin.ts): a refusal here would skip those headers on its error page.
  app.addHook('onRequest', async (request) => {
    if (!CONSOLE_URL.test(request.url) && !PROBE_URL.test(request.url)) refuseBrokenUrl(request.url)
    // A body is read as JSON whatever its Content-Type says (below), so a header that is no media
    // type at all is no reason to refuse it: Fastify answered it "the body must be JSON" before any
    // parser ran, body-less DELETEs included. `application/json, application/json` is what a
    // fetch client sends after appending the header twice. Without it, the body is unlabelled.
    const type = request.headers['content-type']
    if (type !== undefined && !isMediaType(type)) delete request.headers['content-type']
  })
  // Fastify's own JSON parser (with its prototype-poisoning protection), plus the walk above. The
  // walk checks values only when the raw text looks suspect, so ordinary bodies pay one
  // regular-expression scan and a depth walk.
  const parse = app.getDefaultJsonParser('error', 'error')
  // The body's bytes, not Fastify's text: decoding them as text puts U+FFFD in place of bytes that
  // are not UTF-8 (a client sending Latin-1), which would be stored as if they had been sent.
  const parseJson = (request: FastifyRequest, bytes: Buffer, reply: (err: Error | null, value?: unknown) => void): void => {
    // A refusal of a write that carries an Idempotency-Key is answered once the key is claimed
    // (RefusedBody), so that it is stored and replayed as every other completed answer.
    const done = (err: Error | null, value?: unknown): void =>
      err !== null && defersRefusal(request) ? reply(null, new RefusedBody(err, createHash('sha256').update(bytes).digest('hex'))) : reply(err, value)
    // An empty body is no body, whatever the Content-Type says: many clients send
    // `Content-Type: application/json` on every request, a body-less DELETE included.
    if (bytes.length === 0) return done(null, undefined)
    // A compressed body is not read as if it were JSON text (it was "not UTF-8"), nor a body in an
    // unknown coding as if it had none: the client is told to send it as it is.
    const coding = encodingOf(request)
    if (coding !== null) return done(new AppError(Errors.INVALID_REQUEST, `Content-Encoding ${coding} is not supported: send the body uncompressed, without Content-Encoding`), undefined)
    if (!isUtf8(bytes)) return done(new AppError(Errors.INVALID_REQUEST, NOT_UTF8), undefined)
    const body = bytes.toString('utf8')
    const ofItems = request.routeOptions.config?.bodyOfItems === true
    const digest = (): string => createHash('sha256').update(bytes).digest('hex')
    parse(request, body, (err: Error | null, value?: unknown) => {
      if (err) {
        const poisoned = poisonedKeys(body)
        if (poisoned === null) return done(err, undefined)
        if (!ofItems || !Array.isArray(poisoned.root) || poisoned.issues.length === 0) return done(poisonedRefusal(poisoned, ofItems), undefined)
        const items = setItemsAside(request, digest(), poisoned.root, poisoned.issues)
        if (items === null) return done(poisonedRefusal(poisoned, ofItems), undefined)
        value = items
      }
      // A bulk body (an array) lists every failing item with its index and client_ref (CONTRACT §5);
      // any other body, an array sent to a route that takes no items included, its first failure.
      const bulk = ofItems && Array.isArray(value)
      const unstorable = unstorableValues(body, value, bulk)
      if (unstorable.length === 0) return done(null, value)
      const items = bulk && Array.isArray(value) ? setItemsAside(request, setAside.get(request)?.digest ?? digest(), value, unstorable) : null
      if (items === null) return done(bulk ? withItemMeta(new AppError(Errors.INVALID_REQUEST, unstorable), value) : new AppError(Errors.INVALID_REQUEST, unstorable), undefined)
      done(null, items)
    })
  }
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJson)
  // JSON in and out (CONTRACT §1): a body is read as JSON whatever its Content-Type says, so a
  // client that forgets the header or labels JSON text/plain is understood, and anything else is
  // "not valid JSON" (400 invalid_request, a code of the CONTRACT). An empty body is no body (a
  // body-less DELETE that some clients label text/plain).
  app.removeContentTypeParser('text/plain')
  app.addContentTypeParser('*', { parseAs: 'buffer' }, parseJson)
}

/**
 * A write that takes no body (DELETE, POST …/test, …/rotate-secret, …/retry) refuses one that says
 * something (CONTRACT §1: an unknown field is 400), rather than ignoring what the client meant:
 * no body, `null` and `{}` pass.
 */
async function refuseBody(request: FastifyRequest): Promise<void> {
  const body = request.body
  if (body === undefined || body === null) return
  if (typeof body !== 'object' || Array.isArray(body)) throw new AppError(Errors.INVALID_REQUEST, [{ detail: 'this request takes no body', pointer: '' }])
  const keys = Object.keys(body)
  if (keys.length > 0) throw new AppError(Errors.INVALID_REQUEST, keys.map((key) => ({ detail: `unknown field ${JSON.stringify(key)}: this request takes no body`, pointer: `/${escapePointer(key)}` })))
}

/**
 * Integer query parameters (`page[size]`, …) written in decimal digits only: Ajv's coercion reads
 * a string as JavaScript's Number() does, so `0x10`, `1e1`, ` 5` and `+5` passed as 16, 10 and 5
 * where the documents say an integer is wanted.
 */
function digitsOnly(names: readonly string[]): (request: FastifyRequest) => Promise<void> {
  return async (request) => {
    const query = request.query as Record<string, unknown>
    for (const name of names) {
      const value = query[name]
      if (typeof value === 'string' && !/^[0-9]+$/.test(value)) {
        throw new AppError(queryErrorDef(name), [{ detail: `${name} must be a whole number written in digits, such as 10`, parameter: name }])
      }
    }
  }
}

/**
 * The API's routes (`app`), registered after the Idempotency-Key hooks. A query parameter a route
 * does not know is refused (400), never ignored: a write sent with a misspelt or unsupported
 * option (`DELETE /assets/{id}?dry_run=true`) must not run as a plain one. Every route gets a
 * query-string schema that takes no parameter if it has none; one that would let unknown
 * parameters through stops the start, so that each route lists what it reads. Routes that collect
 * their body's schema errors themselves (`attachValidation`: bulk, analytics) still fail at once
 * on their query string. A body the parser refused (RefusedBody) fails once its key is claimed.
 */
export function registerRouteGuards(app: FastifyInstance): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    const schema = (route.schema ??= {})
    if (schema.querystring === undefined) {
      schema.querystring = { type: 'object', additionalProperties: false }
    } else if ((schema.querystring as { additionalProperties?: unknown }).additionalProperties !== false) {
      throw new Error(`${String(route.method)} ${route.url}: its query-string schema must say additionalProperties: false`)
    }
    const integers = Object.entries((schema.querystring as { properties?: Record<string, { type?: unknown }> }).properties ?? {})
      .filter(([, property]) => property.type === 'integer').map(([name]) => name)
    if (integers.length > 0) route.preValidation = [digitsOnly(integers), ...[route.preValidation ?? []].flat()]
    const methods = [route.method].flat()
    if (schema.body === undefined && methods.some((method) => WRITE_METHODS.has(method))) {
      route.preValidation = [...[route.preValidation ?? []].flat(), refuseBody]
    } else if (schema.body !== undefined && schema.response !== undefined) {
      // Every body has a byte limit (KBIS_BODY_LIMIT, KBIS_BULK_BODY_LIMIT): say so in the OpenAPI document.
      (schema.response as Record<string, unknown>)[413] ??= { ...errorEnvelopeSchema, description: 'Body over the byte limit (payload_too_large)' }
    }
  })
  // After the Idempotency-Key is claimed (registerIdempotency runs first): a refused body fails here.
  app.addHook('preValidation', async (request) => {
    if (request.body instanceof RefusedBody) throw request.body.error
  })
  app.addHook('preHandler', async (request) => {
    const error = request.validationError as { validation?: Parameters<typeof validationError>[0]; validationContext?: string } | undefined
    if (error?.validation && error.validationContext !== 'body') throw validationError(error.validation, error.validationContext ?? 'querystring', queryNames(request), request.query)
    // Fastify validates the body before the query string and stops at the first part that fails:
    // on a route that reports body errors itself (attachValidation: analytics, which takes no body
    // as `{}`, and bulk), the query string is validated here, so an unknown parameter is never ignored.
    if (error?.validationContext === 'body') {
      const validate = request.getValidationFunction('querystring')
      if (validate !== undefined && !validate(request.query)) {
        throw validationError((validate.errors ?? []) as Parameters<typeof validationError>[0], 'querystring', queryNames(request), request.query)
      }
    }
  })
}
