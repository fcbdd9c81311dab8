import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** Faults found by an outside suite and by probing (issue 16): each answered as the CONTRACT says. */
for (const store of STORES) {
  describe(`${store}: HTTP-layer hardening`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const server = (hostname: string, extra: Record<string, unknown> = {}) => ({ asset_type_key: 'server', name: hostname, properties: { hostname, ...extra } })
    const raw = (method: string, url: string, payload: string | undefined, headers: Record<string, string> = {}) =>
      t.app.inject({ method: method as 'POST', url, ...(payload !== undefined ? { payload } : {}), headers: { authorization: `Bearer ${t.adminKey}`, ...headers } })

    it('answers a bulk body that is not a JSON array with 400 invalid_request on every /bulk/* route', async () => {
      const routes: [string, string][] = [['POST', '/api/v1/bulk/assets'], ['PATCH', '/api/v1/bulk/assets'], ['PUT', '/api/v1/bulk/assets'], ['POST', '/api/v1/bulk/relationships']]
      const bodies: [string, string][] = [['{"asset_type_key":"note","name":"x"}', 'an object'], ['"items"', 'a string'], ['42', 'a number'], ['null', 'null'], ['true', 'a boolean']]
      for (const [method, url] of routes) {
        for (const [body, what] of bodies) {
          const res = await raw(method, url, body, { 'content-type': 'application/json' })
          expect(res.statusCode, `${method} ${url} ${body}`).toBe(400)
          expect(res.json().errors).toEqual([{
            status: '400', code: 'invalid_request', detail: `a bulk request body must be a JSON array of items; this one is ${what}`,
            source: { pointer: '' }, meta: { request_id: res.headers['x-request-id'] },
          }])
        }
        const none = await raw(method, url, undefined)
        expect(none.statusCode, `${method} ${url} without a body`).toBe(400)
        expect(none.json().errors[0].detail).toBe('a bulk request body must be a JSON array of items; this one is missing')
      }
      const stored = await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name = 'x'")
      expect(stored.rows[0]!.n).toBe(0)
    })

    it('treats Content-Type: application/json with an empty body as no body', async () => {
      const created = await t.request('POST', '/api/v1/assets', { body: server('empty-body') })
      expect(created.status).toBe(201)
      const search = await raw('POST', '/api/v1/search/assets', '', { 'content-type': 'application/json' })
      const searchWithout = await raw('POST', '/api/v1/search/assets', undefined)
      expect(search.statusCode).toBe(200)
      expect(search.json()).toEqual(searchWithout.json())
      const deleted = await raw('DELETE', `/api/v1/assets/${created.body.data.id}`, '', { 'content-type': 'application/json' })
      expect(deleted.statusCode).toBe(204)
      expect((await t.request('GET', `/api/v1/assets/${created.body.data.id}`)).status).toBe(404)
      // A body that is there must still be JSON.
      const bad = await raw('POST', '/api/v1/search/assets', '{', { 'content-type': 'application/json' })
      expect([bad.statusCode, bad.json().errors[0].code]).toEqual([400, 'invalid_request'])
    })

    it('answers a single POST /assets on a taken unique value with 409, its pointer and the value, as bulk does', async () => {
      expect((await t.request('POST', '/api/v1/assets', { body: server('taken-1') })).status).toBe(201)
      const single = await t.request('POST', '/api/v1/assets', { body: server('taken-1') })
      expect(single.status).toBe(409)
      expect(single.body).toEqual({
        errors: [{ status: '409', code: 'unique_violation', detail: 'server taken-1: the unique value is already taken by another asset of this type', source: { pointer: '/properties/hostname' } }],
      })
      const bulk = await t.request('POST', '/api/v1/bulk/assets', { body: [server('taken-1')] })
      expect(bulk.status).toBe(409)
      expect(bulk.body.errors[0]).toEqual({ ...single.body.errors[0], source: { pointer: '/0/properties/hostname' }, meta: { index: 0, client_ref: null } })
      // Nothing of the holder (its id or name) is revealed.
      const holder = await t.request('GET', '/api/v1/assets/server:hostname:taken-1')
      expect(JSON.stringify(single.body)).not.toContain(holder.body.data.id)
    })

    it('says an impossible date is not a calendar date (422), single and bulk', async () => {
      for (const day of ['2024-02-30', '2023-02-29', '2024-13-01', '2024-04-31']) {
        const res = await t.request('POST', '/api/v1/assets', { body: server(`date-${day}`, { purchased_on: day }) })
        expect(res.status, day).toBe(422)
        expect(res.body).toEqual({
          errors: [{ status: '422', code: 'validation_failed', detail: `purchased_on must be a date YYYY-MM-DD: ${day} is not a calendar date`, source: { pointer: '/properties/purchased_on' } }],
        })
      }
      const bulk = await t.request('POST', '/api/v1/bulk/assets', { body: [server('date-bulk', { purchased_on: '2024-02-30' })] })
      expect(bulk.body.errors[0]).toMatchObject({ code: 'validation_failed', detail: 'purchased_on must be a date YYYY-MM-DD: 2024-02-30 is not a calendar date', source: { pointer: '/0/properties/purchased_on' } })
      const leap = await t.request('POST', '/api/v1/assets', { body: server('date-leap', { purchased_on: '2024-02-29' }) })
      expect(leap.status).toBe(201)
    })

    it('sends Location with every 201 (asset, upsert create, relationship, API key); the resource is there', async () => {
      const asset = await t.request('POST', '/api/v1/assets', { body: server('located') })
      expect(asset.status).toBe(201)
      expect(asset.headers.location).toBe(`/api/v1/assets/${asset.body.data.id}`)
      expect((await t.request('GET', asset.headers.location as string)).body.data.id).toBe(asset.body.data.id)

      const upsert = await t.request('PUT', '/api/v1/assets/server:hostname:located-2', { body: { asset_type_key: 'server', name: 'located-2', properties: { hostname: 'located-2' } } })
      expect(upsert.status).toBe(201)
      expect(upsert.headers.location).toBe(`/api/v1/assets/${upsert.body.data.id}`)
      const again = await t.request('PUT', '/api/v1/assets/server:hostname:located-2', { body: { asset_type_key: 'server', name: 'located-2', properties: { hostname: 'located-2' } } })
      expect([again.status, again.headers.location]).toEqual([200, undefined])

      const app = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'located-app', properties: { code: 'located-app' } } })
      const rel = await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'runs_on', source_asset_id: app.body.data.id, target_asset_id: asset.body.data.id } })
      expect(rel.status).toBe(201)
      expect(rel.headers.location).toBe(`/api/v1/relationships/${rel.body.data.id}`)
      expect((await t.request('GET', rel.headers.location as string)).body.data.id).toBe(rel.body.data.id)

      const key = await t.request('POST', '/api/v1/api-keys', { body: { name: 'located', permission_type: 'Viewer', role_keys: ['all'] } })
      expect(key.status).toBe(201)
      expect(key.headers.location).toBe(`/api/v1/api-keys/${key.body.data.id}`)
      expect((await t.request('GET', key.headers.location as string)).body.data.id).toBe(key.body.data.id)

      // Bulk creates many resources: no single Location; each id is in the body (docs/decisions/0006).
      const bulk = await t.request('POST', '/api/v1/bulk/assets', { body: [server('located-bulk')] })
      expect([bulk.status, bulk.headers.location]).toEqual([201, undefined])
    })

    it('builds links as relative paths, never from the Host header', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('link-1'), server('link-2'), server('link-3')] })
      const res = await t.request('GET', '/api/v1/assets?filter[asset_type_key]=server&page[size]=1', { headers: { host: 'attacker.example', 'x-forwarded-host': 'attacker.example' } })
      expect(res.status).toBe(200)
      expect(JSON.stringify(res.body.links)).not.toContain('attacker')
      expect(res.body.links.next).toBe('/api/v1/assets?filter[asset_type_key]=server&page[size]=1&page[number]=2')
      expect(res.body.links.self).toBe('/api/v1/assets?filter[asset_type_key]=server&page[size]=1&page[number]=1')
      // A request line in absolute form names a host as the Host header does: it is not taken either.
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = t.app.server.address() as AddressInfo
      // http.request sends `path` as the request target as it is.
      const body = await new Promise<any>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: 'http://attacker.example/api/v1/assets?filter[asset_type_key]=server&page[size]=1',
          headers: { authorization: `Bearer ${t.adminKey}` } }, (res) => {
          let text = ''
          res.on('data', (chunk) => { text += chunk })
          res.on('end', () => resolve(JSON.parse(text)))
        })
        req.on('error', reject)
        req.end()
      })
      expect(JSON.stringify(body.links)).not.toContain('attacker')
      expect(body.links.next).toBe('/api/v1/assets?filter[asset_type_key]=server&page[size]=1&page[number]=2')
    })

    it('shows last_used_at within about a second of a key\'s use', async () => {
      const created = await t.request('POST', '/api/v1/api-keys', { body: { name: 'used', permission_type: 'Viewer', role_keys: ['all'] } })
      expect(created.body.data.last_used_at).toBeNull()
      const usedAt = Date.now()
      expect((await t.request('GET', '/api/v1/assets?page[size]=1', { key: created.body.data.secret })).status).toBe(200)
      let seen: string | null = null
      while (seen === null && Date.now() - usedAt < 2_000) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        seen = (await t.request('GET', `/api/v1/api-keys/${created.body.data.id}`)).body.data.last_used_at
      }
      expect(seen, 'last_used_at within 2 s').not.toBeNull()
      expect(Math.abs(Date.parse(seen!) - usedAt)).toBeLessThan(3_000)
    })
  })

  describe(`${store}: links and Location with KBIS_PUBLIC_URL`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, undefined, { publicUrl: 'https://inventory.example.com/kb' })
    })
    afterAll(async () => t.close())

    it('starts links and Location with the configured public URL whatever the Host header says', async () => {
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'n1' }, headers: { host: 'attacker.example' } })
      expect(created.headers.location).toBe(`https://inventory.example.com/kb/api/v1/assets/${created.body.data.id}`)
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'n2' } })
      const res = await t.request('GET', '/api/v1/assets?page[size]=1', { headers: { host: 'attacker.example' } })
      expect(res.body.links).toEqual({
        self: 'https://inventory.example.com/kb/api/v1/assets?page[size]=1&page[number]=1',
        first: 'https://inventory.example.com/kb/api/v1/assets?page[size]=1&page[number]=1',
        prev: null,
        next: 'https://inventory.example.com/kb/api/v1/assets?page[size]=1&page[number]=2',
        last: 'https://inventory.example.com/kb/api/v1/assets?page[size]=1&page[number]=2',
      })
    })
  })
}
