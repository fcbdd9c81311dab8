import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

for (const store of STORES) {
  describe(`${store}: metamodel`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    it('lists asset types with their property definitions in file order', async () => {
      const res = await t.request('GET', '/api/v1/metamodel/asset-types')
      expect(res.status).toBe(200)
      expect(res.body.data.map((a: { key: string }) => a.key)).toEqual(['server', 'application', 'note'])
      expect(res.body.meta).toEqual({ page: { number: 1, size: 50, total_items: 3, total_items_exact: true, total_pages: 1 } })
      const server = res.body.data[0]
      expect(server.unique_property_key).toBe('hostname')
      expect(server.properties.map((p: { key: string }) => p.key)).toEqual([
        'hostname', 'environment', 'cpu_count', 'memory_gb', 'purchased_on', 'tags', 'managed', 'owner', 'cost', 'uptime', 'rating',
        'homepage', 'notes', 'summary', 'price',
      ])
      expect(res.body.data[2]).toEqual({
        key: 'note', name: 'Note', description: null, unique_property_key: null,
        properties: [{ key: 'body', asset_type_key: 'note', name: 'body', description: null, type: 'text', required: false, options: null, currency: null, min: null, max: null }],
      })
    })

    it('reads one asset type with every property field', async () => {
      const res = await t.request('GET', '/api/v1/metamodel/asset-types/server')
      expect(res.status).toBe(200)
      const byKey = Object.fromEntries(res.body.data.properties.map((p: { key: string }) => [p.key, p]))
      expect(byKey.hostname).toEqual({ key: 'hostname', asset_type_key: 'server', name: 'Hostname', description: null, type: 'unique_key', required: true, options: null, currency: null, min: null, max: null })
      expect(byKey.environment.options).toEqual(['dev', 'staging', 'prod'])
      expect(byKey.price.currency).toBe('EUR')
      expect([byKey.rating.min, byKey.rating.max]).toEqual([0, 5])
      expect(byKey.cpu_count.min).toBe(1)
    })

    it('answers 404 for an unknown asset type or relationship type', async () => {
      expect((await t.request('GET', '/api/v1/metamodel/asset-types/spaceship')).status).toBe(404)
      expect((await t.request('GET', '/api/v1/metamodel/relationship-types/orbits')).status).toBe(404)
      // A key no type can have is unknown too, as a role's or an access domain's.
      for (const url of ['/api/v1/metamodel/asset-types/BAD', '/api/v1/metamodel/relationship-types/a%20b', '/api/v1/roles/BAD', '/api/v1/access-domains/BAD']) {
        const res = await t.request('GET', url)
        expect(res.status, url).toBe(404)
        expect(res.body.errors[0], url).toMatchObject({ status: '404', code: 'not_found' })
      }
    })

    it('lists property definitions, filtered by asset type', async () => {
      const all = await t.request('GET', '/api/v1/metamodel/property-definitions?page[size]=100')
      expect(all.body.meta.page.total_items).toBe(19)
      const app = await t.request('GET', '/api/v1/metamodel/property-definitions?filter[asset_type_key]=application')
      expect(app.body.data.map((p: { key: string }) => p.key)).toEqual(['code', 'owner', 'tier'])
    })

    it('lists and reads relationship types', async () => {
      const res = await t.request('GET', '/api/v1/metamodel/relationship-types')
      expect(res.body.data).toEqual([
        { key: 'runs_on', name: 'Runs on', description: null, source_asset_type_keys: ['application'], target_asset_type_keys: ['server'] },
        { key: 'depends_on', name: 'Depends on', description: null, source_asset_type_keys: [], target_asset_type_keys: [] },
      ])
      const one = await t.request('GET', '/api/v1/metamodel/relationship-types/runs_on')
      expect(one.body).toEqual({ data: res.body.data[0] })
    })

    it('is readable by a Viewer key', async () => {
      const key = await t.givenKey({ type: 'Viewer' })
      expect((await t.request('GET', '/api/v1/metamodel/asset-types', { key })).status).toBe(200)
    })
  })
}
