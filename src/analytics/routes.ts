import type { FastifyInstance } from 'fastify'
import { analyticsBody, analyticsResponse } from './schemas.js'
import { commonErrorResponses, REMEMBERED_RESULTS } from '../core/schemas.js'
import { runAnalytics } from './service.js'
import { parseLargeFilterFirst } from '../query/filter-schema.js'

/**
 * POST /analytics/assets (CONTRACT §7). Any key (Viewer and up); its roles scope the assets
 * counted. `attachValidation`: the schema documents; analytics/spec.ts checks, with pointers.
 */
export async function analyticsRoutes(app: FastifyInstance): Promise<void> {
  app.post('/analytics/assets', {
    attachValidation: true,
    // Ajv's check of a filter grows with the square of its failing nodes: a large one is read by
    // the parser first (query/filter-schema.ts). Its lists are bounded (maxItems, checked first).
    preValidation: async (request) => parseLargeFilterFirst(request.body),
    schema: {
      tags: ['analytics'], summary: 'Aggregate assets: count, count_distinct, sum, average, grouped and broken down', description: REMEMBERED_RESULTS,
      body: analyticsBody, response: { 200: analyticsResponse, ...commonErrorResponses },
    },
  }, async (request) => runAnalytics(await app.requestContext(request), request.body))
}
