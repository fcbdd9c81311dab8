import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** Hostile or malformed requests: each gets a 4xx in the CONTRACT envelope, never a 500 or SQL. */
for (const store of STORES) {
  describe(`${store}: malformed requests`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const expectClientError = (res: { status: number; body: { errors?: { status: string; code: string; detail: string }[] } }, label: string) => {
      expect(res.status, label).toBeGreaterThanOrEqual(400)
      expect(res.status, label).toBeLessThan(500)
      expect(res.body.errors?.[0]?.status, label).toBe(String(res.status))
      expect(JSON.stringify(res.body), label).not.toMatch(/SELECT|INSERT|UPDATE assets|at .*\.ts:\d+|syntax error/)
    }

    it('answers NUL characters in names, property values and keys with 400, not 500', async () => {
      const bodies = [
        { asset_type_key: 'note', name: 'a\u0000b' },
        { asset_type_key: 'note', name: 'n', properties: { body: 'x\u0000y' } },
        { asset_type_key: 'server', name: 'n', properties: { hostname: 'h\u0000' } },
      ]
      for (const body of bodies) {
        const res = await t.request('POST', '/api/v1/assets', { body })
        expect(res.body).toEqual({ errors: [{ status: '400', code: 'invalid_request', detail: 'text must not contain NUL (U+0000) characters' }] })
      }
    })

    it('answers hostile asset references in paths with 404', async () => {
      for (const ref of ["server:hostname:x'--", '..%2F..%2Fetc', 'a'.repeat(400), 'server:hostname:', '::']) {
        const res = await t.request('GET', `/api/v1/assets/${ref}`)
        expect(res.status, ref).toBe(404)
        expectClientError(res, ref)
      }
      for (const ref of ['%00', 'server:hostname:%00']) {
        const res = await t.request('GET', `/api/v1/assets/${ref}`)
        expect(res.status, ref).toBe(400)
        expectClientError(res, ref)
      }
    })

    it('rejects bodies of the wrong JSON shape with 400 or 422', async () => {
      for (const payload of ['[]', '"text"', '42', 'null', '{"asset_type_key": ["server"], "name": {}}', '{"__proto__": {"x": 1}}']) {
        const res = await t.app.inject({
          method: 'POST', url: '/api/v1/assets', payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
        })
        expectClientError({ status: res.statusCode, body: JSON.parse(res.body) }, payload)
      }
    })

    it('answers a non-JSON content type with 415', async () => {
      const res = await t.app.inject({
        method: 'POST', url: '/api/v1/assets', payload: 'name=x', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/x-www-form-urlencoded' },
      })
      expect(res.statusCode).toBe(415)
      expect(JSON.parse(res.body).errors[0].code).toBe('unsupported_media_type')
    })

    it('answers hostile filter and sort parameters with 400', async () => {
      for (const q of [
        "filter[properties.x'); DROP TABLE assets;--]=1", 'filter[name][x]=1', 'sort=name;DROP', 'sort=,,', 'filter[properties.hostname]=%00',
        'page[number]=99999999999999999999', 'filter=1',
      ]) {
        const res = await t.request('GET', `/api/v1/assets?${q}`)
        expectClientError(res, q)
      }
      expect((await t.request('GET', '/api/v1/assets')).status).toBe(200)
    })
  })
}
