import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { AppError } from '../core/errors.js'
import { bodyIssues, sendError, validationError } from '../core/http-errors.js'
import { commonErrorResponses } from '../core/schemas.js'
import { assertItemCount, entryOf, ItemFailures, withItemMeta } from '../core/items.js'
import { bulkCreateAssetsBody, bulkCreateRelationshipsBody, bulkEnvelope, bulkErrorResponses, bulkPatchAssetsBody } from './schemas.js'
import { createAssets, type BulkAssetInput } from '../assets/create.js'
import { patchAssets, type BulkAssetPatch } from '../assets/update.js'
import { createRelationships, type BulkRelationshipInput } from '../relationships/create.js'

/**
 * /bulk/*: up to 10,000 items per request, all or nothing (CONTRACT §5). HTTP only; the rules
 * live in assets/create.ts, assets/update.ts and relationships/create.ts, which the single
 * writes share (a single write is a bulk write of one).
 */
export async function bulkRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['bulk']
  const response = (success: number) => ({ [success]: bulkEnvelope, ...commonErrorResponses, ...bulkErrorResponses })
  // The larger body limit applies to these routes only; single-record routes keep the small one.
  // Before the body is validated: first the key's permission (a Viewer key gets 403 whatever it
  // sends), then the item count on the parsed array, so 10,001 items cost no item checks.
  // Schema errors do not end the request here (attachValidation): they become failures of their
  // items, and the other items still go through every check, so one answer lists every failing item.
  const options = {
    bodyLimit: app.config.bulkBodyLimit,
    attachValidation: true,
    preValidation: [requirePermission('Editor'), async (request: FastifyRequest) => assertItemCount(request.body)],
  }
  const failuresOf = (request: FastifyRequest): ItemFailures =>
    ItemFailures.fromSchema(request.validationError ? bodyIssues((request.validationError as { validation?: Parameters<typeof bodyIssues>[0] }).validation ?? []) : [])

  // Every issue points into the body (`/3/…`); here each gets meta {index, client_ref}, whether it
  // comes from the schema, a service or the relationship sync. Other errors go to the app's handler.
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const validation = (err as { validation?: Parameters<typeof validationError>[0] }).validation
    const appError = err instanceof AppError ? err : validation ? validationError(validation, (err as { validationContext?: string }).validationContext ?? 'body') : null
    if (!appError) throw err
    return sendError(reply, withItemMeta(appError, request.body))
  })

  app.post('/bulk/assets', {
    ...options,
    schema: { tags, summary: 'Create up to 10,000 assets in one transaction', body: bulkCreateAssetsBody, response: response(201) },
  }, async (request, reply) => {
    const items = request.body as BulkAssetInput[]
    const rows = await createAssets(await app.requestContext(request), items, failuresOf(request))
    return reply.code(201).send({ data: rows.map((row, i) => entryOf(row.id, items[i]!)) })
  })

  app.patch('/bulk/assets', {
    ...options,
    schema: { tags, summary: 'Update up to 10,000 assets in one transaction', body: bulkPatchAssetsBody, response: response(200) },
  }, async (request) => {
    const items = request.body as BulkAssetPatch[]
    const updates = await patchAssets(await app.requestContext(request), items, failuresOf(request))
    return { data: updates.map((u, i) => entryOf(u.after.id, items[i]!)) }
  })

  app.post('/bulk/relationships', {
    ...options,
    schema: { tags, summary: 'Create up to 10,000 relationships in one transaction', body: bulkCreateRelationshipsBody, response: response(201) },
  }, async (request, reply) => {
    const items = request.body as BulkRelationshipInput[]
    const rows = await createRelationships(await app.requestContext(request), items, failuresOf(request))
    return reply.code(201).send({ data: rows.map((row, i) => entryOf(row.id, items[i]!)) })
  })
}
