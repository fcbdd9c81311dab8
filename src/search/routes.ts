import type { FastifyInstance } from 'fastify'
import { searchAssetsBody, searchRelationshipsBody, searchResponses } from './schemas.js'
import { searchAssets } from './assets.js'
import { searchRelationships } from './relationships.js'

/**
 * POST /search/assets, POST /search/relationships (CONTRACT §4). Any key may search (Viewer and up); its roles scope the rows.
 * `attachValidation`: the body schemas document; search/body.ts checks, with per-member codes.
 */
export async function searchRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['search']

  app.post('/search/assets', {
    attachValidation: true,
    schema: {
      tags, summary: 'Search assets: nested filters, sort, pages, include', body: searchAssetsBody,
      response: { 200: searchResponses.assets, ...searchResponses.errors },
    },
  }, async (request) => {
    const result = await searchAssets(await app.requestContext(request), request.body)
    return { data: result.data, meta: { page: result.page } }
  })

  app.post('/search/relationships', {
    attachValidation: true,
    schema: {
      tags, summary: 'Search relationships, on their columns and on either end', body: searchRelationshipsBody,
      response: { 200: searchResponses.relationships, ...searchResponses.errors },
    },
  }, async (request) => {
    const result = await searchRelationships(await app.requestContext(request), request.body)
    return { data: result.data, meta: { page: result.page } }
  })
}
