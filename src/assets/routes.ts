import type { FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { assetCreateBody, assetGetQuery, assetIdParams, assetListQuery, assetPatchBody, assetResponses } from './schemas.js'
import { archiveAssetByRef, createAsset, getAsset, updateAsset } from './service.js'
import { listAssets } from './list.js'
import type { AssetInput, AssetPatch } from './prepare.js'
import { pageLinks } from '../core/pagination.js'
import { includeRelationships } from '../relationships/include.js'

const idOf = (request: FastifyRequest): string => (request.params as { id: string }).id

/** /assets: create, read, update, archive, list (CONTRACT §2, §3). HTTP only; rules live in service.ts. */
export async function assetRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['assets']
  // Before the body is validated: a Viewer key is refused (403) whatever it sends.
  const writer = { preValidation: requirePermission('Editor') }

  app.post('/assets', {
    ...writer,
    schema: {
      tags, summary: 'Create an asset', body: assetCreateBody,
      response: { 201: assetResponses.one, 409: assetResponses.conflict, 422: assetResponses.invalid, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    const data = await createAsset(await app.requestContext(request), request.body as AssetInput)
    return reply.code(201).send({ data })
  })

  app.get('/assets', {
    schema: {
      tags, summary: 'List assets (equality filters, sort, pages, include)', querystring: assetListQuery,
      response: { 200: assetResponses.list, ...assetResponses.errors },
    },
  }, async (request) => {
    const ctx = await app.requestContext(request)
    const query = request.query as Record<string, unknown>
    const result = await listAssets(ctx, query)
    const data = await includeRelationships(ctx, result.data, query)
    return { data, meta: { page: result.page }, links: pageLinks(request, result.page) }
  })

  app.get('/assets/:id', {
    schema: {
      tags, summary: 'Read one asset by UUID or composite key', params: assetIdParams, querystring: assetGetQuery,
      response: { 200: assetResponses.one, 404: assetResponses.notFound, ...assetResponses.errors },
    },
  }, async (request) => {
    const ctx = await app.requestContext(request)
    const asset = await getAsset(ctx, idOf(request))
    const [data] = await includeRelationships(ctx, [asset], request.query as Record<string, unknown>)
    return { data }
  })

  app.patch('/assets/:id', {
    ...writer,
    schema: {
      tags, summary: 'Update an asset (properties merge; null clears)', params: assetIdParams, body: assetPatchBody,
      response: { 200: assetResponses.one, 404: assetResponses.notFound, 409: assetResponses.conflict, 422: assetResponses.invalid, ...assetResponses.errors },
    },
  }, async (request) => {
    const data = await updateAsset(await app.requestContext(request), idOf(request), request.body as AssetPatch)
    return { data }
  })

  app.delete('/assets/:id', {
    ...writer,
    schema: {
      tags, summary: 'Archive an asset (not a permanent deletion)', params: assetIdParams,
      response: { 204: { type: 'null', description: 'Archived' }, 404: assetResponses.notFound, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    await archiveAssetByRef(await app.requestContext(request), idOf(request))
    return reply.code(204).send()
  })
}
