import type { FastifyInstance, FastifyRequest } from 'fastify'
import { locationOf, pageFromQuery, pageLinks, type PageMeta } from '../core/pagination.js'
import { adminResponses, apiKeyCreateBody, apiKeyPatchBody, idParams, keyParams, listQuery } from './schemas.js'
import { createKey, deleteKey, getKey, listKeys, requireKeyManager, updateKey, type KeyInput, type KeyPatch } from '../keys/service.js'
import {
  getAccessDomain, getRole, getUser, listAccessDomains, listRoles, listUsers, type AdminContext, type PageOf,
} from './directory.js'
import { requestStore } from '../core/cut-off.js'

const idOf = (request: FastifyRequest): string => (request.params as { id: string }).id
const keyOf = (request: FastifyRequest): string => (request.params as { key: string }).key

/** The admin services need the store and the caller only (not the metamodel). */
const contextOf = (app: FastifyInstance, request: FastifyRequest): AdminContext => ({
  db: requestStore(request, app.db),
  auth: request.auth,
  requestId: request.id,
  ...(request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : {}),
})

function listEnvelope<T>(request: FastifyRequest, result: PageOf<T>): { data: T[]; meta: { page: PageMeta }; links: Record<string, string | null> } {
  return { data: result.data, meta: { page: result.page }, links: pageLinks(request, result.page) }
}

/** /api-keys (CONTRACT §9). Who may do what is decided in keys-service.ts, not here. */
export async function apiKeyRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['administration']
  const pageOf = (request: FastifyRequest) => pageFromQuery(request.query as Record<string, unknown>)
  // A Viewer key manages no keys: 403 before its body or query is read, as on every write route.
  const manager = { preValidation: async (request: FastifyRequest) => requireKeyManager(request.auth) }

  app.get('/api-keys', {
    ...manager,
    schema: { tags, summary: 'List API keys (Editors: their own; Admins: all of the organization)', querystring: listQuery, response: adminResponses.keys },
  }, async (request) => listEnvelope(request, await listKeys(contextOf(app, request), pageOf(request))))

  app.post('/api-keys', {
    ...manager,
    schema: { tags, summary: 'Create an API key; the secret is in this response only', body: apiKeyCreateBody, response: adminResponses.created },
  }, async (request, reply) => {
    // Dropped afterwards whatever the outcome: a create refused because the caller's own key
    // changed meanwhile (keys/service.ts holdCaller) is sent again with the key as it is now.
    const data = await createKey(contextOf(app, request), request.body as KeyInput).finally(() => app.authenticator.invalidate())
    return reply.code(201).header('Location', locationOf(request, 'api-keys', data.id)).send({ data })
  })

  app.get('/api-keys/:id', {
    ...manager,
    schema: { tags, summary: 'Read an API key', params: idParams, response: adminResponses.key },
  }, async (request) => ({ data: await getKey(contextOf(app, request), idOf(request)) }))

  app.patch('/api-keys/:id', {
    ...manager,
    schema: {
      tags, summary: 'Change name, description, permission type, roles, or (Admin) transfer to another user',
      params: idParams, body: apiKeyPatchBody, response: adminResponses.patched,
    },
  }, async (request) => {
    // The notification reaches this process's cache asynchronously on PostgreSQL; drop it now,
    // also when the caller's own key had changed meanwhile (503, to be sent again).
    const data = await updateKey(contextOf(app, request), idOf(request), request.body as KeyPatch).finally(() => app.authenticator.invalidate())
    return { data }
  })

  app.delete('/api-keys/:id', {
    ...manager,
    schema: { tags, summary: 'Delete an API key for good', params: idParams, response: adminResponses.deleted },
  }, async (request, reply) => {
    await deleteKey(contextOf(app, request), idOf(request))
    app.authenticator.invalidate()
    return reply.code(204).send()
  })
}

/** /roles, /access-domains (any key), /users (Admin keys only). Read-only: `kbis apply` writes them. */
export async function directoryRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['administration']
  const pageOf = (request: FastifyRequest) => pageFromQuery(request.query as Record<string, unknown>)

  app.get('/roles', { schema: { tags, summary: 'List roles and their grants', querystring: listQuery, response: adminResponses.roles } },
    async (request) => listEnvelope(request, await listRoles(contextOf(app, request), pageOf(request))))
  app.get('/roles/:key', { schema: { tags, summary: 'Read a role', params: keyParams, response: adminResponses.role } },
    async (request) => ({ data: await getRole(contextOf(app, request), keyOf(request)) }))

  app.get('/access-domains', { schema: { tags, summary: 'List access domains', querystring: listQuery, response: adminResponses.domains } },
    async (request) => listEnvelope(request, await listAccessDomains(contextOf(app, request), pageOf(request))))
  app.get('/access-domains/:key', { schema: { tags, summary: 'Read an access domain', params: keyParams, response: adminResponses.domain } },
    async (request) => ({ data: await getAccessDomain(contextOf(app, request), keyOf(request)) }))

  app.get('/users', { schema: { tags, summary: 'List users (Admin keys only)', querystring: listQuery, response: adminResponses.users } },
    async (request) => listEnvelope(request, await listUsers(contextOf(app, request), pageOf(request))))
  app.get('/users/:id', { schema: { tags, summary: 'Read a user (Admin keys only)', params: idParams, response: adminResponses.user } },
    async (request) => ({ data: await getUser(contextOf(app, request), idOf(request)) }))
}
