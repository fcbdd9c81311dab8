import type { FastifyInstance } from 'fastify'
import { AppError, Errors } from './errors.js'

/** True when any string (key or value) inside a parsed JSON value holds a NUL character. */
function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000')
  if (Array.isArray(value)) return value.some(containsNul)
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).some(([k, v]) => k.includes('\u0000') || containsNul(v))
  }
  return false
}

const NUL_DETAIL = 'text must not contain NUL (U+0000) characters'

/**
 * PostgreSQL text and jsonb cannot hold NUL characters, so they are refused at the door (400)
 * instead of failing deep inside a statement.
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (/%00/i.test(request.url)) throw new AppError(Errors.INVALID_REQUEST, NUL_DETAIL)
  })
  // Fastify's own JSON parser (with its prototype-poisoning protection), plus the NUL check. The
  // walk runs only when the raw text has the escape, so ordinary bodies pay one substring search.
  const parse = app.getDefaultJsonParser('error', 'error')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parse(request, body as string, (err: Error | null, value?: unknown) => {
      if (err) return done(err, undefined)
      if ((body as string).includes('\\u0000') && containsNul(value)) {
        return done(new AppError(Errors.INVALID_REQUEST, NUL_DETAIL), undefined)
      }
      done(null, value)
    })
  })
}
