import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, Errors } from '../core/errors.js'
import { offsetOf, pageFromQuery, pageLinks, pageMeta } from '../core/pagination.js'
import { keyParams, listQuery, metamodelResponses, propertyListQuery } from './schemas.js'

/** Pages an in-memory list (the metamodel is cached, so its lists never query the store). */
function pageOf<T>(request: FastifyRequest, items: readonly T[]) {
  const page = pageFromQuery(request.query as Record<string, unknown>)
  const meta = pageMeta(page, items.length)
  return { data: items.slice(offsetOf(page), offsetOf(page) + page.size), meta: { page: meta }, links: pageLinks(request, meta) }
}

/** Read-only metamodel endpoints (CONTRACT §8). */
export async function metamodelRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['metamodel']
  const keyOf = (request: FastifyRequest): string => (request.params as { key: string }).key

  app.get('/metamodel/asset-types', {
    schema: { tags, summary: 'List asset types with their property definitions', querystring: listQuery, response: metamodelResponses.assetTypes },
  }, async (request) => pageOf(request, [...(await app.requestContext(request)).metamodel.assetTypes.values()]))

  app.get('/metamodel/asset-types/:key', {
    schema: { tags, summary: 'Read one asset type', params: keyParams, response: metamodelResponses.assetType },
  }, async (request) => {
    const type = (await app.requestContext(request)).metamodel.assetTypes.get(keyOf(request))
    if (!type) throw new AppError(Errors.NOT_FOUND, `asset type ${keyOf(request)} not found`)
    return { data: type }
  })

  app.get('/metamodel/property-definitions', {
    schema: { tags, summary: 'List property definitions (filter[asset_type_key])', querystring: propertyListQuery, response: metamodelResponses.properties },
  }, async (request) => {
    const { metamodel } = await app.requestContext(request)
    const typeKey = (request.query as Record<string, string | undefined>)['filter[asset_type_key]']
    const types = [...metamodel.assetTypes.values()].filter((t) => typeKey === undefined || t.key === typeKey)
    return pageOf(request, types.flatMap((t) => t.properties))
  })

  app.get('/metamodel/relationship-types', {
    schema: { tags, summary: 'List relationship types', querystring: listQuery, response: metamodelResponses.relationshipTypes },
  }, async (request) => pageOf(request, [...(await app.requestContext(request)).metamodel.relationshipTypes.values()]))

  app.get('/metamodel/relationship-types/:key', {
    schema: { tags, summary: 'Read one relationship type', params: keyParams, response: metamodelResponses.relationshipType },
  }, async (request) => {
    const type = (await app.requestContext(request)).metamodel.relationshipTypes.get(keyOf(request))
    if (!type) throw new AppError(Errors.NOT_FOUND, `relationship type ${keyOf(request)} not found`)
    return { data: type }
  })
}
