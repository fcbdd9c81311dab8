import type { FastifyInstance } from 'fastify'
import { jsonDataBody, pageFromQuery, pageLinks } from '../core/pagination.js'
import { assetIdParams } from '../assets/schemas.js'
import { eventErrors, feedQuery, feedResponse, historyErrors, historyQuery, historyResponse } from './schemas.js'
import { readFeed, readHistory } from './service.js'

/** GET /events (the feed) and GET /assets/{id}/history (CONTRACT §13). HTTP only; Viewer and above. */
export async function eventRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['events']

  app.get('/events', {
    schema: {
      tags,
      summary: 'The change feed: events after a cursor, oldest first',
      description: 'Polling with `meta.next_cursor` returns every committed event exactly once, in `sequence` order, also while ' +
        'other requests write. The key sees the events of the assets it can see (a relationship event: both ends); `api_key.*` events need Admin.',
      querystring: feedQuery,
      response: { 200: feedResponse, ...eventErrors },
    },
  }, async (request, reply) => {
    // A read right after a write sees it (on PostgreSQL a stamp under the relay's lock, harmless
    // beside other processes' relays).
    await app.events.feedReady()
    const query = request.query as Record<string, string | number | undefined>
    const feed = await readFeed(await app.requestContext(request), {
      ...(query.after !== undefined ? { after: String(query.after) } : {}),
      ...(query['filter[type]'] !== undefined ? { types: String(query['filter[type]']) } : {}),
      ...(query['filter[subject]'] !== undefined ? { subject: String(query['filter[subject]']) } : {}),
      ...(query['page[size]'] !== undefined ? { size: Number(query['page[size]']) } : {}),
    })
    return jsonDataBody(reply, feed.json, { meta: feed.meta })
  })

  app.get('/assets/:id/history', {
    schema: {
      tags,
      summary: "An asset's events, newest first (with those of relationships touching it)",
      params: assetIdParams,
      querystring: historyQuery,
      response: { 200: historyResponse, ...historyErrors },
    },
  }, async (request, reply) => {
    await app.events.feedReady()
    const result = await readHistory(await app.requestContext(request), (request.params as { id: string }).id, pageFromQuery(request.query as Record<string, unknown>))
    return jsonDataBody(reply, result.json, { meta: { page: result.page }, links: pageLinks(request, result.page) })
  })
}
