import type { FastifyInstance } from 'fastify'
import { stringify } from 'yaml'

export const OPENAPI_INFO = (version: string) => ({
  title: 'kbis inventory API',
  version,
  description:
    'Knowledge-base inventory service, API V1: assets, relationships, search, analytics, metamodel and ' +
    'administration. Authenticate with "Authorization: Bearer <API key>". Errors use the envelope ' +
    '{"errors": [{status, code, detail, source, meta}]}.',
})

/** The generic description, built from the very schemas the routes validate with. */
function baseDocument(app: FastifyInstance): Record<string, unknown> {
  return app.swagger() as unknown as Record<string, unknown>
}

export async function openapiRoutes(app: FastifyInstance): Promise<void> {
  const schema = (format: string) => ({
    tags: ['openapi'],
    summary: `Generic OpenAPI 3.1 description (${format}); no authentication`,
    security: [],
  })
  app.get('/openapi/base.json', { schema: schema('JSON') }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(baseDocument(app)),
  )
  app.get('/openapi/base.yaml', { schema: schema('YAML') }, async (_request, reply) =>
    reply.type('application/yaml; charset=utf-8').send(stringify(baseDocument(app), { aliasDuplicateObjects: false })),
  )
}
