import type { FastifyInstance, FastifyRequest } from 'fastify'
import { requirePermission } from '../core/auth/permissions.js'
import { jsonDataBody, locationOf, pageLinks } from '../core/pagination.js'
import { REMEMBERED_RESULTS } from '../core/schemas.js'
import { relationshipCreateBody, relationshipGetQuery, relationshipIdParams, relationshipListQuery, relationshipResponses } from './schemas.js'
import { createRelationship, deleteRelationship, getRelationship } from './service.js'
import { listRelationships } from './list.js'
import { parseEndIncludes } from './ends.js'
import type { RelationshipInput } from './prepare.js'
import { dryRun, dryRunEnvelope, sendDryRun, writeQuery } from '../request/dry-run.js'

const idOf = (request: FastifyRequest): string => (request.params as { id: string }).id

/** /relationships: create, read, delete (permanent), list (CONTRACT §6, §3). HTTP only. */
export async function relationshipRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['relationships']
  // Before the body is validated: a Viewer key is refused (403) whatever it sends.
  const writer = { preValidation: requirePermission('Editor') }

  app.post('/relationships', {
    ...writer,
    schema: {
      tags, summary: 'Create a relationship (ends by UUID or composite key)', body: relationshipCreateBody, querystring: writeQuery,
      response: { 201: relationshipResponses.one, 200: dryRunEnvelope, 409: relationshipResponses.conflict, 422: relationshipResponses.invalid, ...relationshipResponses.errors },
    },
  }, async (request, reply) => {
    const ctx = await app.requestContext(request)
    if ((request.query as { dry_run?: boolean }).dry_run === true) {
      await dryRun(ctx, (dry) => createRelationship(dry, request.body as RelationshipInput))
      return sendDryRun(reply, 1)
    }
    const data = await createRelationship(ctx, request.body as RelationshipInput)
    return reply.code(201).header('Location', locationOf(request, 'relationships', data.id)).send({ data })
  })

  app.get('/relationships', {
    schema: {
      tags, summary: 'List relationships (equality filters, sort, pages, include)', description: REMEMBERED_RESULTS, querystring: relationshipListQuery,
      response: { 200: relationshipResponses.list, ...relationshipResponses.errors },
    },
  }, async (request, reply) => {
    const result = await listRelationships(await app.requestContext(request), request.query as Record<string, unknown>)
    const links = pageLinks(request, result.page)
    return 'json' in result ? jsonDataBody(reply, result.json, { meta: { page: result.page }, links }) : { data: result.data, meta: { page: result.page }, links }
  })

  app.get('/relationships/:id', {
    schema: {
      tags, summary: 'Read one relationship', params: relationshipIdParams, querystring: relationshipGetQuery,
      response: { 200: relationshipResponses.one, 404: relationshipResponses.notFound, ...relationshipResponses.errors },
    },
  }, async (request) => {
    const include = parseEndIncludes((request.query as { include?: string }).include)
    return { data: await getRelationship(await app.requestContext(request), idOf(request), include) }
  })

  app.delete('/relationships/:id', {
    ...writer,
    schema: {
      tags, summary: 'Delete a relationship (permanent)', params: relationshipIdParams,
      response: { 204: { type: 'null', description: 'Deleted' }, 404: relationshipResponses.notFound, ...relationshipResponses.errors },
    },
  }, async (request, reply) => {
    await deleteRelationship(await app.requestContext(request), idOf(request))
    return reply.code(204).send()
  })
}
