import type { FastifyInstance, FastifyRequest } from 'fastify'
import { SEARCH_BODY_CODES, searchAssetsBody, searchRelationshipsBody, searchResponses } from './schemas.js'
import { searchAssets } from './assets.js'
import { searchRelationships } from './relationships.js'
import { jsonDataBody } from '../core/pagination.js'
import { REMEMBERED_RESULTS } from '../core/schemas.js'
import { parseLargeFilterFirst } from '../query/filter-schema.js'

/**
 * POST /search/assets, POST /search/relationships (CONTRACT §4). Any key may search (Viewer and up); its roles scope the rows.
 * The body schemas validate (each failure with the code of its member, SEARCH_BODY_CODES); a
 * request without a body searches everything.
 */
export async function searchRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['search']
  const config = { bodyErrorCodes: SEARCH_BODY_CODES }
  const preValidation = async (request: FastifyRequest) => {
    if (request.body === undefined || request.body === null) request.body = {}
    parseLargeFilterFirst(request.body)
  }

  app.post('/search/assets', {
    config,
    preValidation,
    schema: {
      tags, summary: 'Search assets: nested filters, sort, pages, include', description: REMEMBERED_RESULTS, body: searchAssetsBody,
      response: { 200: searchResponses.assets, ...searchResponses.errors },
    },
  }, async (request, reply) => {
    const result = await searchAssets(await app.requestContext(request), request.body, 'json')
    return 'json' in result ? jsonDataBody(reply, result.json, { meta: { page: result.page } }) : { data: result.data, meta: { page: result.page } }
  })

  app.post('/search/relationships', {
    config,
    preValidation,
    schema: {
      tags, summary: 'Search relationships, on their columns and on either end', description: REMEMBERED_RESULTS, body: searchRelationshipsBody,
      response: { 200: searchResponses.relationships, ...searchResponses.errors },
    },
  }, async (request, reply) => {
    const result = await searchRelationships(await app.requestContext(request), request.body)
    return 'json' in result ? jsonDataBody(reply, result.json, { meta: { page: result.page } }) : { data: result.data, meta: { page: result.page } }
  })
}
