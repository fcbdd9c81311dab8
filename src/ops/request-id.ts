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

/**
 * Fastify's log controller with its request lines off (src/ops/http.ts writes the one line per
 * request), except the cause of an answer that broke off after its headers were sent (an export
 * whose next batch failed): with request logging off Fastify would drop it too. A client that went
 * away is no error: its request line says so.
 */
class RequestLogController extends LogController {
  override streamError(error: Error & { code?: string }, _request: unknown, reply: { log: { warn: (o: object, m: string) => void } }): void {
    if (error.code !== 'ERR_STREAM_PREMATURE_CLOSE') reply.log.warn({ err: error }, 'the answer broke off after its headers were sent')
  }
}

/** The Fastify options that make request ids and the one-line-per-request log work (see src/ops/http.ts). */
export function requestIdOptions() {
  return {
    requestIdHeader: false as const,
    genReqId: requestIdOf,
    // Every line of a request's child logger carries `request_id`; src/ops/http.ts writes the one
    // line per request itself (with the caller and the route pattern), so Fastify's two are off.
    logController: new RequestLogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
  }
}
