import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { typeCheck } from '../helpers/typecheck.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import openapiTS, { astToString } from 'openapi-typescript'
import { parse } from 'yaml'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'

const SERVER_SCHEMA = {
  type: 'object',
  title: 'Server properties',
  'x-kbis-asset-type-key': 'server',
  properties: {
    hostname: { title: 'Hostname', type: 'string', minLength: 1, maxLength: 500, pattern: "^[^:/?#\\[\\]@!$&'()*+,;=\\\\\\u0009-\\u000d\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]+$" },
    environment: { type: 'string', enum: ['dev', 'staging', 'prod'] },
    cpu_count: { type: 'integer', minimum: 1 },
    memory_gb: { type: 'number' },
    purchased_on: { type: 'string', pattern: '^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}$', format: 'date' },
    tags: { type: 'array', items: { type: 'string', enum: ['pci', 'gdpr', 'legacy'] }, uniqueItems: true, maxItems: 3 },
    managed: { type: 'boolean' },
    owner: { type: 'string' },
    cost: { type: 'number' },
    uptime: { type: 'number', minimum: 0, maximum: 100 },
    rating: { type: 'integer', minimum: 0, maximum: 5 },
    homepage: { type: 'string', format: 'uri' },
    notes: { type: 'string' },
    summary: { type: 'string' },
    price: { type: 'number', description: 'An amount in EUR', 'x-kbis-currency': 'EUR' },
  },
  required: ['hostname'],
  additionalProperties: false,
}

const HEADER = "import type { components, paths } from './schema'\ntype S = components['schemas']\n"

for (const store of STORES) {
  describe(`${store}: typed OpenAPI description`, () => {
    let t: TestApp
    let viewerKey: string
    let doc: any

    beforeAll(async () => {
      t = await createTestApp(store)
      viewerKey = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
      doc = (await t.request('GET', '/api/v1/openapi/typed.json', { key: viewerKey })).body
    })
    afterAll(async () => t.close())

    it('requires a key, of any permission type', async () => {
      const res = await t.request('GET', '/api/v1/openapi/typed.json', { key: null })
      expect(res.status).toBe(401)
      expect((await t.request('GET', '/api/v1/openapi/typed.yaml', { key: null })).status).toBe(401)
      expect(doc.openapi).toBe('3.1.0')
    })

    it('is valid OpenAPI 3.1', async () => {
      const result = await new Validator().validate(structuredClone(doc))
      expect(result.errors ?? []).toEqual([])
      expect(result.valid).toBe(true)
    })

    it('has one schema per asset type with names, types, enums, dates and required', () => {
      expect(doc.components.schemas.Server).toEqual(SERVER_SCHEMA)
      expect(doc.components.schemas.Application.required).toEqual(['code'])
      expect(doc.components.schemas.Note).toMatchObject({ properties: { body: { type: 'string' } }, additionalProperties: false })
      expect(doc.components.schemas.ServerPatch.properties.environment).toEqual({
        anyOf: [{ type: 'string', enum: ['dev', 'staging', 'prod'] }, { type: 'null' }],
      })
      // A required property may change on PATCH but not be cleared: no null for it.
      expect(doc.components.schemas.ServerPatch.properties.hostname).toEqual(SERVER_SCHEMA.properties.hostname)
    })

    it('enumerates the asset and relationship type keys', () => {
      expect(doc.components.schemas.RelationshipTypeKey.enum).toEqual(['runs_on', 'depends_on'])
      expect(doc.components.schemas.AssetTypeKey.enum).toEqual(['server', 'application', 'note'])
      const relPost = doc.paths['/api/v1/relationships']?.post
      if (relPost) {
        const schema = relPost.requestBody.content['application/json'].schema
        expect(schema.properties.relationship_type_key.$ref).toBe('#/components/schemas/RelationshipTypeKey')
      }
    })

    it('types asset create and update bodies and records per asset type', () => {
      const body = (path: string, method: string) => doc.paths[path][method].requestBody.content['application/json'].schema
      expect(body('/api/v1/assets', 'post')).toEqual({ $ref: '#/components/schemas/AssetCreate' })
      expect(body('/api/v1/assets/{id}', 'patch')).toEqual({ $ref: '#/components/schemas/AssetUpdate' })
      const create = doc.components.schemas.AssetCreate
      expect(create.oneOf).toEqual(['Server', 'Application', 'Note'].map((n) => ({ $ref: `#/components/schemas/${n}AssetCreate` })))
      expect(create.discriminator.propertyName).toBe('asset_type_key')
      const server = doc.components.schemas.ServerAssetCreate
      expect(server.properties.asset_type_key).toEqual({ type: 'string', const: 'server' })
      expect(server.properties.properties).toEqual({ $ref: '#/components/schemas/ServerInput' })
      // A create body may send null for a property it does not set (the record never holds one).
      const input = doc.components.schemas.ServerInput
      expect(input.required).toEqual(['hostname'])
      expect(input.properties.owner).toEqual({ anyOf: [SERVER_SCHEMA.properties.owner, { type: 'null' }] })
      expect(input.properties.hostname).toEqual(SERVER_SCHEMA.properties.hostname)
      expect(server.required).toEqual(['asset_type_key', 'name', 'properties'])
      expect(doc.components.schemas.ServerAssetUpdate.properties.properties).toEqual({ $ref: '#/components/schemas/ServerPatch' })
      // A PUT (upsert) body replaces: the create body's properties, but for the unique key, which the path gives.
      const replace = doc.components.schemas.ServerReplace
      expect(replace.properties).toEqual(input.properties)
      expect(replace.required).toBeUndefined()
      expect(replace.additionalProperties).toBe(false)
      for (const put of [body('/api/v1/assets/{id}', 'put'), body('/api/v1/bulk/assets', 'put').items]) {
        expect(put.anyOf.map((b: { properties: { properties: unknown; asset_type_key: unknown } }) => [b.properties.asset_type_key, b.properties.properties])).toEqual(
          ['server', 'application', 'note'].map((key, i) => [{ type: 'string', const: key }, { $ref: `#/components/schemas/${['Server', 'Application', 'Note'][i]}Replace` }]))
      }
      const one = doc.paths['/api/v1/assets/{id}'].get.responses['200'].content['application/json'].schema
      expect(one.properties.data).toEqual({ $ref: '#/components/schemas/Asset' })
    })

    it('serves the same document as YAML', async () => {
      const yaml = await t.app.inject({ method: 'GET', url: '/api/v1/openapi/typed.yaml', headers: { authorization: `Bearer ${viewerKey}` } })
      expect(yaml.statusCode).toBe(200)
      expect(yaml.headers['content-type']).toBe('application/yaml; charset=utf-8')
      expect(parse(yaml.body)).toEqual(doc)
      // A YAML 1.1 reader (PyYAML) reads the same: timestamps and options like `yes` stay strings.
      expect(parse(yaml.body, { version: '1.1' })).toEqual(doc)
    })

    it('is regenerated when the metamodel changes', async () => {
      const setup = structuredClone(ACME)
      setup.metamodel.asset_types[0]!.properties[1]!.options = ['dev', 'staging', 'prod', 'qa']
      setup.metamodel.relationship_types.push({ key: 'owned_by', name: 'Owned by', source_asset_type_keys: [], target_asset_type_keys: [] })
      await applySetup(t.store.db, setup as unknown as SetupFile)
      // The change reaches the metamodel cache through the store's notification (asynchronous on PostgreSQL).
      let next = doc
      for (let i = 0; i < 100 && next.components.schemas.RelationshipTypeKey.enum.length === 2; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        next = (await t.request('GET', '/api/v1/openapi/typed.json')).body
      }
      expect(next.components.schemas.Server.properties.environment.enum).toEqual(['dev', 'staging', 'prod', 'qa'])
      expect(next.components.schemas.RelationshipTypeKey.enum).toEqual(['runs_on', 'depends_on', 'owned_by'])
      expect(next.info['x-kbis-metamodel-version']).toBeGreaterThan(doc.info['x-kbis-metamodel-version'])
      await applySetup(t.store.db, ACME as unknown as SetupFile)
    })

    it('generates a TypeScript client that accepts valid assets and rejects invalid ones', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kbis-client-'))
      try {
        await writeFile(join(dir, 'schema.ts'), astToString(await openapiTS(structuredClone(doc))))
        const diagnostics = await typeCheck(dir, {
          'good.ts': `${HEADER}
export function take(server: S['Server']): string { return server.hostname }
take({ hostname: 'x', environment: 'prod' })
take({ hostname: 'x', purchased_on: '2026-01-31', tags: ['pci', 'gdpr'], cpu_count: 4, managed: true })
const body: S['AssetCreate'] = { asset_type_key: 'server', name: 'web-01', properties: { hostname: 'web-01' } }
export const app: S['AssetCreate'] = {
  asset_type_key: 'application', name: 'crm', properties: { code: 'crm', tier: 'gold' },
  relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:web-01' }] } } },
}
type PostBody = paths['/api/v1/assets']['post']['requestBody']['content']['application/json']
export const sent: PostBody = body
export const kind: S['RelationshipTypeKey'] = 'runs_on'
`,
          'bad-option.ts': `${HEADER}export const s: S['Server'] = { hostname: 'x', environment: 'moon' }\n`,
          'bad-missing.ts': `${HEADER}export const s: S['Server'] = { environment: 'prod' }\n`,
          'bad-property.ts': `${HEADER}export const c: S['ServerAssetCreate'] = { asset_type_key: 'server', name: 'x', properties: { hostname: 'x', code: 'y' } }\n`,
          'bad-relationship.ts': `${HEADER}export const k: S['RelationshipTypeKey'] = 'owns'\n`,
        })
        expect(diagnostics['good.ts']).toEqual([])
        expect(diagnostics['bad-option.ts']!.join('\n')).toContain('"moon"')
        for (const file of ['bad-missing.ts', 'bad-property.ts', 'bad-relationship.ts']) expect(diagnostics[file], file).not.toEqual([])
        expect(Object.keys(diagnostics).sort()).toEqual(['bad-missing.ts', 'bad-option.ts', 'bad-property.ts', 'bad-relationship.ts', 'good.ts'])
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })

    // Last: it adds an asset type with assets, which the ACME set-up cannot remove again.
    it('forbids nothing the server accepts: list filters by type take any key (another matches nothing); a PUT body requires no property (?merge=true keeps them)', async () => {
      const param = (path: string, name: string) => doc.paths[path].get.parameters.find((p: { name: string }) => p.name === name).schema
      expect(param('/api/v1/assets', 'filter[asset_type_key]')).toMatchObject({ type: 'string', examples: ['server', 'application', 'note'] })
      expect(param('/api/v1/assets', 'filter[asset_type_key]').enum).toBeUndefined()
      expect(param('/api/v1/relationships', 'filter[relationship_type_key]')).toMatchObject({ type: 'string', examples: ['runs_on', 'depends_on'] })
      const unknown = await t.request('GET', '/api/v1/assets?filter[asset_type_key]=nope')
      expect([unknown.status, unknown.body.data]).toEqual([200, []])
      // A type with a required property besides its unique key.
      const setup = structuredClone(ACME)
      setup.metamodel.asset_types.push({ key: 'printer', name: 'Printer', properties: [
        { key: 'serial', name: 'Serial', type: 'unique_key', required: true }, { key: 'model', name: 'Model', type: 'text', required: true }] } as never)
      await applySetup(t.store.db, setup as unknown as SetupFile)
      let next = doc
      for (let i = 0; i < 100 && !next.components.schemas.PrinterReplace; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        next = (await t.request('GET', '/api/v1/openapi/typed.json')).body
      }
      const replace = next.components.schemas.PrinterReplace
      expect(replace.required).toBeUndefined()
      expect(replace.description).toBe('A replacement: properties left out are cleared, and model must be given (422 otherwise); with ?merge=true an existing asset keeps them, as on PATCH, and none is required.')
      const put = next.paths['/api/v1/assets/{id}'].put.requestBody.content['application/json'].schema
      const printer = put.anyOf.find((b: { properties: { asset_type_key: { const: string } } }) => b.properties.asset_type_key.const === 'printer')
      expect(printer.required).toEqual(['name'])
      // What the schema allows, the server takes with ?merge=true, and refuses without it.
      expect((await t.request('PUT', '/api/v1/assets/printer:serial:p-1', { body: { name: 'p-1', properties: { model: 'X' } } })).status).toBe(201)
      expect((await t.request('PUT', '/api/v1/assets/printer:serial:p-1?merge=true', { body: { name: 'p-1b' } })).status).toBe(200)
      expect((await t.request('PUT', '/api/v1/assets/printer:serial:p-1', { body: { name: 'p-1c' } })).status).toBe(422)
    })
  })
}
