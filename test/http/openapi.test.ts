import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { parse } from 'yaml'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

for (const store of STORES) {
  describe(`${store}: OpenAPI base description`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    it('is a valid OpenAPI 3.1 document, served without authentication', async () => {
      const res = await t.request('GET', '/api/v1/openapi/base.json', { key: null })
      expect(res.status).toBe(200)
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
      const result = await new Validator().validate(res.body)
      expect(result.errors ?? []).toEqual([])
      expect(result.valid).toBe(true)
      expect(res.body.openapi).toBe('3.1.0')
    })

    it('serves the same document as YAML', async () => {
      const json = await t.request('GET', '/api/v1/openapi/base.json', { key: null })
      const yaml = await t.app.inject({ method: 'GET', url: '/api/v1/openapi/base.yaml' })
      expect(yaml.statusCode).toBe(200)
      expect(yaml.headers['content-type']).toBe('application/yaml; charset=utf-8')
      expect(parse(yaml.body)).toEqual(json.body)
      // A YAML 1.1 reader (PyYAML) reads the same: timestamp examples stay strings.
      expect(parse(yaml.body, { version: '1.1' })).toEqual(json.body)
    })

    it('refuses a query parameter, as every route refuses one it does not take, and declares that answer', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      for (const path of ['/api/v1/openapi/base.json', '/api/v1/openapi/base.yaml']) {
        const res = await t.request('GET', `${path}?x=1`, { key: null })
        expect(res.status).toBe(400)
        expect(res.body.errors).toEqual([expect.objectContaining({ code: 'invalid_request', detail: 'unknown query parameter x', source: { parameter: 'x' } })])
        // The 400, and the 503 of a server shutting down, are declared (outside OpenAPI audit: they were not).
        expect(Object.keys(doc.paths[path].get.responses), path).toEqual(expect.arrayContaining(['200', '400', '503']))
      }
    })

    it('describes the routes with the schemas they validate with', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      const post = doc.paths['/api/v1/assets'].post
      expect(post.requestBody.content['application/json'].schema.required).toEqual(['asset_type_key', 'name'])
      expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '409', '413', '422', '429']))
      // Every write says that a body has a byte limit (one that takes none reads a body to refuse
      // it), and what its Idempotency-Key may answer (CONTRACT §16); reads say neither.
      for (const [path, item] of Object.entries<Record<string, { requestBody?: unknown; responses: Record<string, { description?: string }> }>>(doc.paths)) {
        for (const [method, operation] of Object.entries(item)) {
          if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue
          const write = ['post', 'patch', 'put', 'delete'].includes(method)
          expect('413' in operation.responses, `${method} ${path}`).toBe(write || operation.requestBody !== undefined)
          if (!write) continue
          expect(operation.responses['409']?.description, `${method} ${path}`).toMatch(/idempotency_key_in_use/)
          expect(operation.responses['422']?.description, `${method} ${path}`).toMatch(/idempotency_key_reused/)
        }
      }
      // A PATCH or PUT that may be a dry run documents both of its 200s.
      for (const [path, method] of [['/api/v1/assets/{id}', 'patch'], ['/api/v1/assets/{id}', 'put'], ['/api/v1/bulk/assets', 'patch'], ['/api/v1/bulk/assets', 'put']] as const) {
        const ok = doc.paths[path]?.[method]?.responses['200'].content['application/json'].schema
        expect(ok?.oneOf?.[1]?.properties?.meta?.properties?.dry_run, `${method} ${path}`).toEqual({ type: 'boolean', enum: [true] })
      }
      const get = doc.paths['/api/v1/assets'].get
      const size = get.parameters.find((p: { name: string }) => p.name === 'page[size]')
      expect(size.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 })
      expect(doc.paths['/api/v1/openapi/base.json'].get.security).toEqual([])
      // A body is required where a route needs one; search and analytics read none as `{}`.
      expect(post.requestBody.required).toBe(true)
      for (const path of ['/api/v1/search/assets', '/api/v1/search/relationships', '/api/v1/analytics/assets']) {
        expect(doc.paths[path].post.requestBody.required, path).toBe(false)
        expect((await t.request('POST', path)).status, path).toBe(200)
      }
      // Analytics checks its body itself (with pointers); the schema says what it refuses: an empty `as`.
      const analytics = doc.paths['/api/v1/analytics/assets'].post.requestBody.content['application/json'].schema
      const asOf = (schema: { properties?: Record<string, any>; oneOf?: any[]; anyOf?: any[]; items?: any }): unknown[] =>
        [schema.properties?.as, ...Object.values(schema.properties ?? {}), ...(schema.oneOf ?? []), ...(schema.anyOf ?? []), schema.items]
          .filter((s) => typeof s === 'object' && s !== null).flatMap((s) => (s === schema.properties?.as ? [s] : asOf(s)))
      const names = asOf(analytics)
      expect(names.length).toBeGreaterThanOrEqual(2)
      for (const as of names) expect(as).toMatchObject({ type: 'string', minLength: 1 })
      // The documents themselves: JSON, and YAML text.
      for (const path of ['/api/v1/openapi/base.yaml', '/api/v1/openapi/typed.yaml']) {
        expect(doc.paths[path].get.responses['200'].content, path).toEqual({ 'application/yaml': { schema: { type: 'string' } } })
      }
      expect(Object.keys(doc.paths['/api/v1/openapi/base.json'].get.responses['200'].content)).toEqual(['application/json'])
      expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
    })

    it('documents the Idempotency-Key header on writes and the export formats', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      for (const [path, method] of [['/api/v1/assets', 'post'], ['/api/v1/assets/{id}', 'patch'], ['/api/v1/assets/{id}', 'delete'], ['/api/v1/bulk/assets', 'post']] as const) {
        const header = doc.paths[path][method].parameters.find((p: { in: string; name: string }) => p.in === 'header' && p.name === 'idempotency-key')
        expect(header).toMatchObject({ required: false, schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' } })
      }
      expect(doc.paths['/api/v1/assets'].get.parameters.some((p: { name: string }) => p.name === 'idempotency-key')).toBe(false)
      const exported = doc.paths['/api/v1/export/assets'].get
      expect(exported.parameters.find((p: { name: string }) => p.name === 'format').schema).toEqual({ type: 'string', enum: ['ndjson', 'csv'], default: 'ndjson' })
      expect(Object.keys(exported.responses['200'].content)).toEqual(['application/x-ndjson', 'text/csv'])
    })

    it('types the search filter (SearchFilterNode): what it takes and refuses is what the service takes and refuses by shape', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      const ref = { $ref: '#/components/schemas/SearchFilterNode' }
      expect(doc.components.schemas.SearchFilterNode.oneOf.map((s: { title: string }) => s.title)).toEqual(['SearchCondition', 'SearchAndGroup', 'SearchOrGroup'])
      expect(doc.components.schemas.SearchFilterNode.oneOf[1].properties.and.items).toEqual(ref)
      const bodies = ['/api/v1/search/assets', '/api/v1/search/relationships', '/api/v1/analytics/assets']
      for (const path of bodies) {
        expect(doc.paths[path].post.requestBody.content['application/json'].schema.properties.filter.oneOf[0], path).toEqual(ref)
      }
      const ajv = new Ajv2020({ strict: false })
      ajv.addSchema({ ...doc, $id: 'kbis' })
      const filterOf = ajv.compile({ $ref: 'kbis#/paths/~1api~1v1~1search~1assets/post/requestBody/content/application~1json/schema/properties/filter' })
      const condition = { field: 'created_at', operator: 'greater_than', value: '2000-01-01' }
      const taken: unknown[] = [null, {}, condition, { and: [] }, { or: [condition, { and: [condition, { or: [] }] }] }]
      const refused: unknown[] = [[condition], 'id', { and: [condition], or: [] }, { and: {} }, { ...condition, extra: 1 }, { field: '', operator: 'is_empty' }, { field: 'id', operator: 'like' }, { operator: 'is_empty' }]
      for (const filter of [...taken, ...refused]) {
        const accepted = taken.includes(filter)
        expect(filterOf(filter), JSON.stringify(filter)).toBe(accepted)
        for (const path of bodies) {
          const res = await t.request('POST', path, { body: { filter } })
          expect([res.status, res.body.errors?.[0]?.code], `${path} ${JSON.stringify(filter)}`).toEqual(accepted ? [200, undefined] : [400, 'invalid_filter'])
        }
      }
    })

    it('documents the count rule: page[count] and total_items_exact (CONTRACT §1)', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      for (const path of ['/api/v1/assets', '/api/v1/relationships']) {
        const count = doc.paths[path].get.parameters.find((p: { name: string }) => p.name === 'page[count]')
        expect(count.schema).toMatchObject({ type: 'string', enum: ['exact'] })
        const page = doc.paths[path].get.responses['200'].content['application/json'].schema.properties.meta.properties.page
        expect(page.required).toEqual(['number', 'size', 'total_items', 'total_items_exact', 'total_pages'])
        expect(page.properties.total_items_exact.type).toBe('boolean')
      }
      for (const path of ['/api/v1/search/assets', '/api/v1/search/relationships']) {
        const body = doc.paths[path].post.requestBody.content['application/json'].schema
        expect(body.properties.page.properties.count).toMatchObject({ type: 'string', enum: ['exact'] })
      }
    })
  })
}
