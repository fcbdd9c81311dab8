import type { FastifyRequest } from 'fastify'

/** The methods that write (CONTRACT §16: Idempotency-Key and dry runs apply to them). */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PATCH', 'PUT', 'DELETE'])

/** The POSTs that only read (a search, an analytics query), as `METHOD pattern`. */
const READING_POSTS: ReadonlySet<string> = new Set(['POST /api/v1/search/assets', 'POST /api/v1/search/relationships', 'POST /api/v1/analytics/assets'])

/** Whether a request writes: a write method on a route that is no read (a search or analytics POST reads). */
export function writes(request: FastifyRequest): boolean {
  return WRITE_METHODS.has(request.method) && !READING_POSTS.has(`${request.method} ${request.routeOptions.url ?? ''}`)
}
