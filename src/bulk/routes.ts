import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { AppError } from '../core/errors.js'
import { bodyIssues, sendError, validationError } from '../core/http-errors.js'
import { commonErrorResponses } from '../core/schemas.js'
import { assertItemCount, ItemFailures, withItemMeta } from './items.js'
import { bulkCreateAssetsBody, bulkCreateRelationshipsBody, bulkEnvelope, bulkErrorResponses, bulkPatchAssetsBody } from './schemas.js'
import { createAssetsInBulk, type BulkAssetInput } from './create.js'
import { updateAssetsInBulk, type BulkAssetPatch } from './update.js'
import { createRelationshipsInBulk, type BulkRelationshipInput } from './relationships.js'

/**
 * /bulk/*: up to 10,000 items per request, all or nothing (CONTRACT §5). HTTP only; the rules
 * live in create.ts, update.ts and relationships.ts.
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
    const data = await createAssetsInBulk(await app.requestContext(request), request.body as BulkAssetInput[], failuresOf(request))
    return reply.code(201).send({ data })
  })

  app.patch('/bulk/assets', {
    ...options,
    schema: { tags, summary: 'Update up to 10,000 assets in one transaction', body: bulkPatchAssetsBody, response: response(200) },
  }, async (request) => {
    const data = await updateAssetsInBulk(await app.requestContext(request), request.body as BulkAssetPatch[], failuresOf(request))
    return { data }
  })

  app.post('/bulk/relationships', {
    ...options,
    schema: { tags, summary: 'Create up to 10,000 relationships in one transaction', body: bulkCreateRelationshipsBody, response: response(201) },
  }, async (request, reply) => {
    const data = await createRelationshipsInBulk(await app.requestContext(request), request.body as BulkRelationshipInput[], failuresOf(request))
    return reply.code(201).send({ data })
  })
}
