import type { FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { assetCreateBody, assetGetQuery, assetIdParams, assetKeyParams, assetListQuery, assetPatchBody, assetPutBody, assetResponses } from './schemas.js'
import { archiveAssetByRef, createAsset, getAsset, updateAsset, upsertAsset } from './service.js'
import type { UpsertItem } from './upsert.js'
import { dryRun, dryRunEnvelope, sendDryRun, upsertQuery, writeQuery } from '../request/dry-run.js'
import { listAssets } from './list.js'
import type { AssetInput, AssetPatch } from './prepare.js'
import { jsonDataBody, locationOf, pageLinks } from '../core/pagination.js'
import { REMEMBERED_RESULTS } from '../core/schemas.js'
import { includeOptionsFromQuery, includeRelationshipsWith } from '../relationships/include.js'

const idOf = (request: FastifyRequest): string => (request.params as { id: string }).id
const isDryRun = (request: FastifyRequest): boolean => (request.query as { dry_run?: boolean }).dry_run === true

/** /assets: create, read, update, archive, list (CONTRACT §2, §3). HTTP only; rules live in service.ts. */
export async function assetRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['assets']
  // Before the body is validated: a Viewer key is refused (403) whatever it sends.
  const writer = { preValidation: requirePermission('Editor') }

  app.post('/assets', {
    ...writer,
    schema: {
      tags, summary: 'Create an asset', body: assetCreateBody, querystring: writeQuery,
      response: { 201: assetResponses.one, 200: dryRunEnvelope, 409: assetResponses.conflict, 422: assetResponses.invalid, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    const ctx = await app.requestContext(request)
    if (isDryRun(request)) {
      await dryRun(ctx, (dry) => createAsset(dry, request.body as AssetInput))
      return sendDryRun(reply, 1)
    }
    const data = await createAsset(ctx, request.body as AssetInput)
    return reply.code(201).header('Location', locationOf(request, 'assets', data.id)).send({ data })
  })

  app.get('/assets', {
    schema: {
      tags, summary: 'List assets (equality filters, sort, pages, include)', description: REMEMBERED_RESULTS, querystring: assetListQuery,
      response: { 200: assetResponses.list, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    const result = await listAssets(await app.requestContext(request), request.query as Record<string, unknown>)
    const links = pageLinks(request, result.page)
    return 'json' in result ? jsonDataBody(reply, result.json, { meta: { page: result.page }, links }) : { data: result.data, meta: { page: result.page }, links }
  })

  app.get('/assets/:id', {
    schema: {
      tags, summary: 'Read one asset by UUID or composite key', params: assetIdParams, querystring: assetGetQuery,
      response: { 200: assetResponses.one, 404: assetResponses.notFound, ...assetResponses.errors },
    },
  }, async (request) => {
    const ctx = await app.requestContext(request)
    // Read first: a bad include option is a 400 whether or not the asset is found (404).
    const include = includeOptionsFromQuery(request.query as Record<string, unknown>)
    const asset = await getAsset(ctx, idOf(request))
    return { data: include === null ? asset : (await includeRelationshipsWith(ctx, [asset], include))[0] }
  })

  app.patch('/assets/:id', {
    ...writer,
    schema: {
      tags, summary: 'Update an asset (properties merge; null clears)', params: assetIdParams, body: assetPatchBody, querystring: writeQuery,
      response: { 200: assetResponses.one, 404: assetResponses.notFound, 409: assetResponses.conflict, 422: assetResponses.invalid, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    const ctx = await app.requestContext(request)
    if (isDryRun(request)) {
      await dryRun(ctx, (dry) => updateAsset(dry, idOf(request), request.body as AssetPatch))
      return sendDryRun(reply, 1)
    }
    const data = await updateAsset(ctx, idOf(request), request.body as AssetPatch)
    return { data }
  })

  app.put('/assets/:id', {
    ...writer,
    schema: {
      tags,
      summary: 'Create or replace an asset by composite key (upsert; ?merge=true merges as PATCH)',
      description: '201 when created, 200 when updated or unchanged (an asset whose values equal the stored ones is not written: updated_at stays). With dry_run=true: 200 {"data": null, "meta": {"dry_run": true, "items": 1}}.',
      params: assetKeyParams, body: assetPutBody, querystring: upsertQuery,
      response: { 201: assetResponses.one, 200: assetResponses.one, 404: assetResponses.notFound, 409: assetResponses.conflict, 422: assetResponses.invalid, ...assetResponses.errors },
    },
  }, async (request, reply) => {
    const ctx = await app.requestContext(request)
    const item: UpsertItem = { ...(request.body as Omit<UpsertItem, 'id'>), id: idOf(request) }
    const merge = (request.query as { merge?: boolean }).merge === true
    if (isDryRun(request)) {
      await dryRun(ctx, (dry) => upsertAsset(dry, item, merge))
      return sendDryRun(reply, 1)
    }
    const { data, result } = await upsertAsset(ctx, item, merge)
    if (result === 'created') reply.header('Location', locationOf(request, 'assets', data.id))
    return reply.code(result === 'created' ? 201 : 200).send({ data })
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
