import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, Errors, type Issue } from './errors.js'

function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1')
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a string cannot be stored as PostgreSQL text or jsonb, or null when it can. */
function badText(text: string): string | null {
  if (text.includes('\u0000')) return 'text must not contain NUL (U+0000) characters'
  if (LONE_SURROGATE.test(text)) return 'text must be valid Unicode: a lone surrogate escape (\\ud800–\\udfff without its pair) cannot be stored'
  return null
}

/**
 * The first value of a parsed body that JSON can carry but the store cannot: NUL characters and
 * lone UTF-16 surrogates in keys or strings, and numbers too large for a 64-bit float (JSON.parse
 * reads `1e400` as Infinity, which would be written as null). Returns the issue with its pointer.
 */
function findUnstorable(value: unknown, pointer: string): Issue | null {
  if (typeof value === 'string') {
    const detail = badText(value)
    return detail ? { detail, pointer } : null
  }
  if (typeof value === 'number') {
    return Number.isFinite(value) ? null : { detail: 'number out of range: it does not fit a 64-bit float', pointer }
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], `${pointer}/${i}`)
      if (found) return found
    }
    return null
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const at = `${pointer}/${escapePointer(key)}`
      const detail = badText(key)
      if (detail) return { detail: `a key: ${detail}`, pointer: at }
      const found = findUnstorable(item, at)
      if (found) return found
    }
  }
  return null
}

// Only a raw body with one of these can hold an unstorable value: the escapes of NUL and of
// surrogates (raw UTF-8 cannot carry a lone surrogate), or a number that may pass 1.8e308 (an
// exponent of 2 digits or more, or a run of 100 digits: 1 and 215 zeros then e99 overflows).
// The walk itself decides; these only spare it on ordinary bodies.
const SUSPECT = /\\u0000|\\u[dD][89a-fA-F]|\d[eE][+-]?\d{2}|\d{100}/

const NUL_IN_URL = 'text must not contain NUL (U+0000) characters'

const POISON_DETAIL = 'keys named "__proto__" (or "constructor" holding "prototype") are not accepted'

/** Fastify's parser reports a poisoned body as invalid JSON: valid JSON that it refused is poisoned. */
function isPoisoned(body: string): boolean {
  try {
    JSON.parse(body)
    return true
  } catch {
    return false
  }
}

/**
 * Values PostgreSQL cannot store are refused at the door (400 invalid_request with a pointer)
 * instead of failing deep inside a statement (500) or being stored as something else.
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (/%00/i.test(request.url)) throw new AppError(Errors.INVALID_REQUEST, NUL_IN_URL)
  })
  // Fastify's own JSON parser (with its prototype-poisoning protection), plus the walk above. The
  // walk runs only when the raw text looks suspect, so ordinary bodies pay one regular-expression scan.
  const parse = app.getDefaultJsonParser('error', 'error')
  const parseJson = (request: FastifyRequest, body: string | Buffer, done: (err: Error | null, value?: unknown) => void): void => {
    // An empty body is no body, whatever the Content-Type says: many clients send
    // `Content-Type: application/json` on every request, a body-less DELETE included.
    if (body === '' || body.length === 0) return done(null, undefined)
    parse(request, body as string, (err: Error | null, value?: unknown) => {
      if (err) return done(isPoisoned(body as string) ? new AppError(Errors.INVALID_REQUEST, POISON_DETAIL) : err, undefined)
      const unstorable = SUSPECT.test(body as string) ? findUnstorable(value, '') : null
      if (unstorable) return done(new AppError(Errors.INVALID_REQUEST, [unstorable]), undefined)
      done(null, value)
    })
  }
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJson)
  // JSON in and out (CONTRACT §1): a body is read as JSON whatever its Content-Type says, so a
  // client that forgets the header or labels JSON text/plain is understood, and anything else is
  // "not valid JSON" (400 invalid_request, a code of the CONTRACT). An empty body is no body (a
  // body-less DELETE that some clients label text/plain).
  app.removeContentTypeParser('text/plain')
  app.addContentTypeParser('*', { parseAs: 'string' }, parseJson)
}
