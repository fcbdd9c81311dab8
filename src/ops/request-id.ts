import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { LogController } from 'fastify'

/** A client's own id is kept when it is short and plain (CONTRACT §17): it goes into logs and headers as is. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/

/**
 * Fastify's `genReqId`: `request.id` IS the request id, so every log line of the request (its child
 * logger), the error envelope and the events carry the same value. Fastify's own `requestIdHeader`
 * is off because it would take any header value unchecked.
 */
export function requestIdOf(raw: IncomingMessage): string {
  const given = raw.headers['x-request-id']
  const value = Array.isArray(given) ? given[0] : given
  return value !== undefined && REQUEST_ID_PATTERN.test(value) ? value : randomUUID()
}

/** The Fastify options that make request ids and the one-line-per-request log work (see src/ops/http.ts). */
export function requestIdOptions() {
  return {
    requestIdHeader: false as const,
    genReqId: requestIdOf,
    // Every line of a request's child logger carries `request_id`; src/ops/http.ts writes the one
    // line per request itself (with the caller and the route pattern), so Fastify's two are off.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
  }
}
