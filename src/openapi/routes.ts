import type { FastifyInstance, FastifyRequest } from 'fastify'
import { typedDocument } from './typed.js'
import { commonErrorResponses } from '../core/schemas.js'
import { registerRouteGuards } from '../core/http-input.js'

export const OPENAPI_INFO = (version: string) => ({
  title: 'kbis inventory API',
  version,
  description:
    'Knowledge-base inventory service, API V1: assets, relationships, search, analytics, metamodel and ' +
    'administration. Authenticate with "Authorization: Bearer <API key>". Errors use the envelope ' +
    '{"errors": [{status, code, detail, source, meta}]}. A request body is read as JSON (UTF-8) whatever its Content-Type; ' +
    'in any body, a string holding NUL (U+0000) or a lone surrogate, a number beyond a 64-bit float, or an integer a 64-bit float ' +
    'cannot hold exactly is refused (400 invalid_request), whatever the schema of its field says.',
})

/** The generic description, built from the very schemas the routes validate with. */
function baseDocument(app: FastifyInstance): Record<string, unknown> {
  return app.swagger() as unknown as Record<string, unknown>
}

/**
 * YAML written for YAML 1.1 readers too (PyYAML, js-yaml 3, many generators): strings they would
 * read as something else are quoted — options such as `yes`, `on` or `2025-01-01` (booleans and
 * dates there), timestamp examples, keys such as `n` — so every parser reads the JSON document.
 * Still plain YAML 1.2 (no directive); objects that appear twice are written out, not aliased.
 */
const YAML_OPTIONS = { aliasDuplicateObjects: false, version: '1.1' } as const

/** The YAML writer, loaded when a YAML document is first asked for: not by every server's start. */
const yaml = () => import('yaml')

/** The 200 of the document routes: the document itself, as JSON or as YAML text (sent as it is, not serialized by a schema). */
const OPENAPI_JSON = { type: 'object', additionalProperties: true, description: 'An OpenAPI 3.1 document' }
const OPENAPI_YAML = { description: 'An OpenAPI 3.1 document (YAML)', content: { 'application/yaml': { schema: { type: 'string' } } } }

export async function openapiRoutes(app: FastifyInstance): Promise<void> {
  // As every other route: a query parameter it does not take is refused (it takes none).
  registerRouteGuards(app)
  const schema = (format: string, document: object) => ({
    tags: ['openapi'],
    summary: `Generic OpenAPI 3.1 description (${format}); no authentication`,
    security: [],
    // A query parameter it does not take is 400; a server shutting down answers 503, as everywhere.
    response: { 200: document, 400: commonErrorResponses[400], 503: commonErrorResponses[503] },
  })
  app.get('/openapi/base.json', { schema: schema('JSON', OPENAPI_JSON) }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(baseDocument(app)),
  )
  app.get('/openapi/base.yaml', { schema: schema('YAML', OPENAPI_YAML) }, async (_request, reply) =>
    reply.type('application/yaml; charset=utf-8').send((await yaml()).stringify(baseDocument(app), YAML_OPTIONS)),
  )
}

interface TypedEntry {
  version: number
  document: Record<string, unknown>
  /** Serialized once per version: the document is large (hundreds of KB). */
  json: string
  yaml?: string
}

/**
 * /openapi/typed.json|yaml (CONTRACT §11): the base description typed by the caller's metamodel.
 * Any permission type may read it. Documents are cached per organization and metamodel version:
 * every metamodel change bumps the version, so the next request regenerates the document.
 */
export async function typedOpenapiRoutes(app: FastifyInstance): Promise<void> {
  const cache = new Map<string, TypedEntry>()
  const entryFor = async (request: FastifyRequest): Promise<TypedEntry> => {
    const { metamodel, auth } = await app.requestContext(request)
    const cached = cache.get(auth.orgId)
    if (cached && cached.version === metamodel.version) return cached
    const document = typedDocument(baseDocument(app), metamodel, auth.orgKey)
    const entry: TypedEntry = { version: metamodel.version, document, json: JSON.stringify(document) }
    cache.set(auth.orgId, entry)
    return entry
  }
  const schema = (format: string, document: object) => ({
    tags: ['openapi'],
    summary: `OpenAPI 3.1 description typed by the organization's metamodel (${format}): one schema per asset type`,
    response: { 200: document, ...commonErrorResponses },
  })
  app.get('/openapi/typed.json', { schema: schema('JSON', OPENAPI_JSON) }, async (request, reply) =>
    reply.type('application/json; charset=utf-8').send((await entryFor(request)).json),
  )
  app.get('/openapi/typed.yaml', { schema: schema('YAML', OPENAPI_YAML) }, async (request, reply) => {
    const entry = await entryFor(request)
    entry.yaml ??= (await yaml()).stringify(entry.document, YAML_OPTIONS)
    return reply.type('application/yaml; charset=utf-8').send(entry.yaml)
  })
}
