import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { AppError, Errors } from '../core/errors.js'
import { setAsideIssues } from '../core/http-input.js'
import { bodyIssues, sendError, validationError } from '../core/http-errors.js'
import { commonErrorResponses } from '../core/schemas.js'
import { assertItemCount, entryOf, ItemFailures, withItemMeta } from '../core/items.js'
import { bulkCreateAssetsBody, bulkCreateRelationshipsBody, bulkEnvelope, bulkErrorResponses, bulkPatchAssetsBody, bulkUpsertAssetsBody, bulkUpsertEnvelope } from './schemas.js'
import { upsertAssets, type UpsertItem } from '../assets/upsert.js'
import { dryRun, dryRunEnvelope, sendDryRun, upsertQuery, writeQuery } from '../request/dry-run.js'
import type { RequestContext } from '../request/context.js'
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
  const response = (success: number, envelope: object = bulkEnvelope) => ({ [success]: envelope, ...(success === 200 ? {} : { 200: dryRunEnvelope }), ...commonErrorResponses, ...bulkErrorResponses })
  // ?dry_run=true: the same write in a transaction that rolls back; the answer counts the items.
  const run = async <T>(request: FastifyRequest, write: (ctx: RequestContext) => Promise<T>): Promise<T | null> => {
    const ctx = await app.requestContext(request)
    if ((request.query as { dry_run?: boolean }).dry_run !== true) return write(ctx)
    await dryRun(ctx, write)
    return null
  }
  // The larger body limit applies to these routes only; single-record routes keep the small one.
  // Before the body is validated: first the key's permission (a Viewer key gets 403 whatever it
  // sends), then the item count on the parsed array, so 10,001 items cost no item checks.
  // Schema errors do not end the request here (attachValidation): they become failures of their
  // items, and the other items still go through every check, so one answer lists every failing item.
  const options = {
    bodyLimit: app.config.bulkBodyLimit,
    attachValidation: true,
    // An item holding a value the store cannot take is one failing item among the others (core/http-input.ts).
    config: { bodyOfItems: true },
    preValidation: [requirePermission('Editor'), async (request: FastifyRequest) => assertItemCount(request.body)],
  }
  const failuresOf = (request: FastifyRequest): ItemFailures => ItemFailures.fromSchema([
    ...setAsideIssues(request).map((issue) => ({ ...issue, def: Errors.INVALID_REQUEST })),
    ...(request.validationError ? bodyIssues((request.validationError as { validation?: Parameters<typeof bodyIssues>[0] }).validation ?? []) : []),
  ])

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
    schema: { tags, summary: 'Create up to 10,000 assets in one transaction', body: bulkCreateAssetsBody, querystring: writeQuery, response: response(201) },
  }, async (request, reply) => {
    const items = request.body as BulkAssetInput[]
    const rows = await run(request, (ctx) => createAssets(ctx, items, failuresOf(request)))
    if (rows === null) return sendDryRun(reply, items.length)
    return reply.code(201).send({ data: rows.map((row, i) => entryOf(row.id, items[i]!)) })
  })

  app.patch('/bulk/assets', {
    ...options,
    schema: { tags, summary: 'Update up to 10,000 assets in one transaction', body: bulkPatchAssetsBody, querystring: writeQuery, response: response(200) },
  }, async (request, reply) => {
    const items = request.body as BulkAssetPatch[]
    const updates = await run(request, (ctx) => patchAssets(ctx, items, failuresOf(request)))
    if (updates === null) return sendDryRun(reply, items.length)
    return { data: updates.map((u, i) => entryOf(u.id, items[i]!)) }
  })

  app.put('/bulk/assets', {
    ...options,
    schema: {
      tags,
      summary: 'Create or replace up to 10,000 assets by composite key (upsert) in one transaction',
      description: 'Each item is created, updated, or unchanged (its values equal the stored ones: not written, updated_at kept). ?merge=true merges as PATCH. With dry_run=true: 200 {"data": null, "meta": {"dry_run": true, "items": <count>}}.',
      body: bulkUpsertAssetsBody, querystring: upsertQuery, response: response(200, bulkUpsertEnvelope),
    },
  }, async (request, reply) => {
    const items = request.body as UpsertItem[]
    const merge = (request.query as { merge?: boolean }).merge === true
    const outcomes = await run(request, (ctx) => upsertAssets(ctx, items, failuresOf(request), { merge }))
    if (outcomes === null) return sendDryRun(reply, items.length)
    return { data: outcomes.map((o, i) => ({ ...entryOf(o.id, items[i]!), result: o.result })) }
  })

  app.post('/bulk/relationships', {
    ...options,
    schema: { tags, summary: 'Create up to 10,000 relationships in one transaction', body: bulkCreateRelationshipsBody, querystring: writeQuery, response: response(201) },
  }, async (request, reply) => {
    const items = request.body as BulkRelationshipInput[]
    const rows = await run(request, (ctx) => createRelationships(ctx, items, failuresOf(request)))
    if (rows === null) return sendDryRun(reply, items.length)
    return reply.code(201).send({ data: rows.map((row, i) => entryOf(row.id, items[i]!)) })
  })
}
