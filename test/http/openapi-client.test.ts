import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import openapiTS, { astToString } from 'openapi-typescript'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { typeCheck } from '../helpers/typecheck.js'
import { operationIdOf } from '../../src/openapi/operations.js'

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options']

/** Every operation of a document with its operationId and parameters. */
function operationsOf(doc: any): { path: string; method: string; operationId?: string; parameters: { name: string; in: string; style?: string }[] }[] {
  return Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item).filter(([method]) => METHODS.includes(method)).map(([method, op]) => ({ path, method, operationId: op.operationId, parameters: op.parameters ?? [] })))
}

describe('operation ids', () => {
  it('are derived from method and path', () => {
    expect(operationIdOf('GET', '/api/v1/assets')).toBe('getAssets')
    expect(operationIdOf('GET', '/api/v1/assets/{id}')).toBe('getAssetsById')
    expect(operationIdOf('POST', '/api/v1/bulk/relationships')).toBe('postBulkRelationships')
    expect(operationIdOf('GET', '/api/v1/openapi/base.json')).toBe('getOpenapiBaseJson')
    expect(operationIdOf('DELETE', '/api/v1/api-keys/:id')).toBe('deleteApiKeysById')
  })
})

for (const store of STORES) {
  describe(`${store}: OpenAPI documents a generated client can use without casts`, () => {
    let t: TestApp
    let base: any
    let typed: any
    beforeAll(async () => {
      t = await createTestApp(store)
      base = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      typed = (await t.request('GET', '/api/v1/openapi/typed.json')).body
    })
    afterAll(async () => t.close())

    it('gives every operation a unique operationId, in the base and the typed document', () => {
      for (const doc of [base, typed]) {
        const ops = operationsOf(doc)
        expect(ops.length).toBeGreaterThan(20)
        expect(ops.filter((op) => !op.operationId).map((op) => `${op.method} ${op.path}`)).toEqual([])
        const ids = ops.map((op) => op.operationId)
        expect(new Set(ids).size).toBe(ids.length)
      }
    })

    it('documents Location on the 201 of single creates, not on bulk creates', () => {
      for (const [path, method] of [['/api/v1/assets', 'post'], ['/api/v1/relationships', 'post'], ['/api/v1/api-keys', 'post'], ['/api/v1/assets/{id}', 'put']] as const) {
        expect(base.paths[path][method].responses['201'].headers?.Location?.schema, `${method} ${path}`).toEqual({ type: 'string' })
      }
      expect(base.paths['/api/v1/bulk/assets'].post.responses['201'].headers?.Location).toBeUndefined()
    })

    it('declares the headers the answers carry, from components/headers: the request id, the quota, Retry-After, Idempotent-Replayed', async () => {
      const ref = (name: string) => ({ $ref: `#/components/headers/${name}` })
      const id = { 'X-Request-Id': ref('X-Request-Id') }
      const quota = { 'RateLimit-Limit': ref('RateLimit-Limit'), 'RateLimit-Remaining': ref('RateLimit-Remaining'), 'RateLimit-Reset': ref('RateLimit-Reset') }
      const retry = { 'Retry-After': ref('Retry-After') }
      const replayed = { 'Idempotent-Replayed': ref('Idempotent-Replayed') }
      for (const doc of [base, typed]) {
        expect(Object.keys(doc.components.headers).sort()).toEqual(['Idempotent-Replayed', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'WWW-Authenticate', 'X-Request-Id'])
        const create = doc.paths['/api/v1/assets'].post.responses
        expect(create['201'].headers).toEqual({ Location: expect.objectContaining({ schema: { type: 'string' } }), ...id, ...quota, ...replayed })
        expect(create['422'].headers).toEqual({ ...id, ...quota, ...replayed })
        // 429 and 5xx answers are not kept for a repeat, nor is a body over the limit (read before the key is claimed).
        expect(create['429'].headers).toEqual({ ...id, ...quota, ...retry })
        expect(create['503'].headers).toEqual({ ...id, ...quota, ...retry })
        expect(create['413'].headers).toEqual({ ...id, ...quota })
        expect(create['401'].headers).toEqual({ ...id, ...quota, ...replayed, 'WWW-Authenticate': ref('WWW-Authenticate') })
        // Any operation: the HTTP layer's 431 (no key read yet) and an unexpected 500, in the error envelope.
        expect(create['431'].headers).toEqual(id)
        expect(create['500'].headers).toEqual({ ...id, ...quota })
        expect(doc.paths['/api/v1/bulk/assets'].put.responses['200'].headers).toEqual({ ...id, ...quota, ...replayed })
        expect(doc.paths['/api/v1/assets/{id}'].delete.responses['204'].headers).toEqual({ ...id, ...quota, ...replayed })
        expect(doc.paths['/api/v1/assets'].get.responses['200'].headers).toEqual({ ...id, ...quota })
        // Without a key: the request id alone.
        expect(doc.paths['/api/v1/openapi/base.json'].get.responses['200'].headers).toEqual(id)
        for (const [path, item] of Object.entries<any>(doc.paths)) {
          for (const [method, operation] of Object.entries<any>(item)) {
            for (const [status, response] of Object.entries<any>(operation.responses)) expect(response.headers?.['X-Request-Id'], `${method} ${path} ${status}`).toEqual(id['X-Request-Id'])
            for (const status of ['431', '500']) {
              expect(operation.responses[status]?.content['application/json'].schema.required, `${method} ${path} ${status}`).toEqual(['errors'])
            }
          }
        }
        expect(doc.paths['/api/v1/openapi/base.json'].get.responses['500'].description).toContain('internal_error')
      }
      // What the document declares is what the answers carry.
      const body = { asset_type_key: 'server', name: 'replayed-01', properties: { hostname: 'replayed-01' } }
      const first = await t.request('POST', '/api/v1/assets', { body, headers: { 'idempotency-key': 'openapi-headers-1' } })
      const again = await t.request('POST', '/api/v1/assets', { body, headers: { 'idempotency-key': 'openapi-headers-1' } })
      expect([first.status, again.status]).toEqual([201, 201])
      expect(first.headers['idempotent-replayed']).toBeUndefined()
      for (const name of ['x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'location']) expect(again.headers[name], name).toBeDefined()
      expect(again.headers['idempotent-replayed']).toBe('true')
      const refused = await t.request('GET', '/api/v1/assets', { key: 'kbis_nope' })
      expect(refused.status).toBe(401)
      expect(refused.headers['www-authenticate']).toBe('Bearer')
    })

    it('names every filter[...] and relationships_filter[...] parameter, with a deepObject for property filters', () => {
      const names = (path: string, method = 'get') => base.paths[path][method].parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name)
      expect(names('/api/v1/assets')).toEqual(expect.arrayContaining([
        'filter[id]', 'filter[asset_type_key]', 'filter[name]', 'filter[access_domain_key]', 'filter',
        'page[number]', 'page[size]', 'page[count]', 'sort', 'include',
        'relationships_filter[relationship_type_key]', 'relationships_filter[direction]', 'relationships_filter[related_asset.asset_type_key]',
        'relationships_filter[related_asset.name]', 'relationships_page[number]', 'relationships_page[size]', 'relationships_sort',
      ]))
      // The direction takes its two values only, as the route checks (outside OpenAPI audit: a plain string before).
      for (const path of ['/api/v1/assets', '/api/v1/assets/{id}']) {
        const direction = base.paths[path].get.parameters.find((p: any) => p.name === 'relationships_filter[direction]')
        expect(direction.schema, path).toMatchObject({ type: 'string', enum: ['outgoing', 'incoming'] })
      }
      expect(names('/api/v1/assets/{id}')).toEqual(expect.arrayContaining(['relationships_filter[direction]', 'relationships_page[size]']))
      expect(names('/api/v1/relationships')).toEqual(expect.arrayContaining(['filter[relationship_type_key]', 'filter[source_asset_id]', 'filter[target_asset_id]']))
      expect(names('/api/v1/relationships')).not.toContain('filter')
      expect(names('/api/v1/export/assets')).toEqual(expect.arrayContaining(['format', 'filter[asset_type_key]', 'filter']))
      // An empty example: Swagger UI's "Try it out" otherwise sends a made-up filter[additionalProp1]=string (400).
      for (const path of ['/api/v1/assets', '/api/v1/export/assets']) {
        expect(base.paths[path].get.parameters.find((p: any) => p.name === 'filter'), path).toMatchObject({ style: 'deepObject', example: {} })
      }
      // The property definitions take filter[asset_type_key] alone (any other filter is refused).
      expect(names('/api/v1/metamodel/property-definitions')).toEqual(['page[number]', 'page[size]', 'page[count]', 'filter[asset_type_key]'])
      // Every operation documents a success: the YAML document as text.
      expect(base.paths['/api/v1/openapi/typed.yaml'].get.responses['200']).toEqual({ headers: expect.any(Object), description: 'An OpenAPI 3.1 document (YAML)', content: { 'application/yaml': { schema: { type: 'string' } } } })
      for (const [path, item] of Object.entries<any>(base.paths)) {
        for (const [method, operation] of Object.entries<any>(item)) expect(Object.keys(operation.responses).some((s) => s.startsWith('2')), `${method} ${path}`).toBe(true)
      }
      const deep = base.paths['/api/v1/assets'].get.parameters.find((p: any) => p.name === 'filter')
      expect(deep).toMatchObject({ in: 'query', style: 'deepObject', explode: true, schema: { type: 'object', additionalProperties: { type: 'string' } } })
    })

    it('generates a client (openapi-typescript) with which a program filters and pages without casts', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kbis-base-client-'))
      try {
        await writeFile(join(dir, 'schema.ts'), astToString(await openapiTS(structuredClone(base))))
        const header = "import type { operations, paths } from './schema'\n"
        const diagnostics = await typeCheck(dir, {
          'filters.ts': `${header}
type AssetQuery = NonNullable<paths['/api/v1/assets']['get']['parameters']['query']>
export const servers: AssetQuery = {
  'filter[asset_type_key]': 'server',
  'filter[access_domain_key]': 'it',
  filter: { 'properties.environment': 'prod' },
  'page[size]': 100,
  'page[number]': 2,
  sort: '-name',
  'relationships_filter[direction]': 'outgoing',
}
export const same: NonNullable<operations['getAssets']['parameters']['query']> = servers
type RelationshipQuery = NonNullable<operations['getRelationships']['parameters']['query']>
export const runsOn: RelationshipQuery = { 'filter[relationship_type_key]': 'runs_on', 'filter[source_asset_id]': 'application:code:crm' }
type ExportQuery = NonNullable<operations['getExportAssets']['parameters']['query']>
export const csv: ExportQuery = { format: 'csv', 'filter[asset_type_key]': 'server' }
type Listed = operations['getAssets']['responses'][200]['content']['application/json']
export function firstName(page: Listed): string | undefined { return page.data[0]?.name }
`,
          'bad-filter.ts': `${header}export const q: NonNullable<operations['getAssets']['parameters']['query']> = { 'filter[asset_type]': 'server' }\n`,
          'bad-page.ts': `${header}export const q: NonNullable<operations['getAssets']['parameters']['query']> = { 'page[size]': 'ten' }\n`,
        })
        expect(diagnostics['filters.ts']).toEqual([])
        expect(diagnostics['bad-filter.ts']!.join('\n')).toContain('filter[asset_type]')
        expect(diagnostics['bad-page.ts']).not.toEqual([])
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
      // What the program sends works on the server.
      const res = await t.request('GET', '/api/v1/assets?filter[asset_type_key]=server&filter[properties.environment]=prod&page[size]=100')
      expect(res.status).toBe(200)
    })
  })
}
