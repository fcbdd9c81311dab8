import { gunzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** The interactive API reference, response compression and CORS (issue 16, the first hour). */
for (const store of STORES) {
  describe(`${store}: API reference, compression, CORS off by default`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      const items = Array.from({ length: 60 }, (_, i) => ({ asset_type_key: 'server', name: `srv-${i}`, properties: { hostname: `srv-${i}`, owner: 'x'.repeat(40) } }))
      expect((await t.request('POST', '/api/v1/bulk/assets', { body: items })).status).toBe(201)
    })
    afterAll(async () => t.close())

    it('serves Swagger UI at /docs without a key, over the served OpenAPI document; /api/v1/docs needs a key as any API path', async () => {
      const page = await t.app.inject({ method: 'GET', url: '/docs' })
      const html = page.statusCode === 302 ? await t.app.inject({ method: 'GET', url: String(page.headers.location) }) : page
      expect(html.statusCode).toBe(200)
      expect(html.headers['content-type']).toMatch(/^text\/html/)
      const script = /src="([^"]*swagger-initializer\.js)"/.exec(html.body)
      expect(script, 'the page loads swagger-initializer.js').not.toBeNull()
      const initializer = await t.app.inject({ method: 'GET', url: new URL(script![1]!, 'http://x/docs/').pathname })
      expect(initializer.statusCode).toBe(200)
      expect(initializer.body).toContain("resolveUrl('./json')")
      const json = await t.app.inject({ method: 'GET', url: '/docs/json' })
      const base = await t.app.inject({ method: 'GET', url: '/api/v1/openapi/base.json' })
      expect(json.statusCode).toBe(200)
      expect(Object.keys(json.json().paths)).toEqual(Object.keys(base.json().paths))
      const bundle = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' })
      expect(bundle.statusCode).toBe(200)
      // Under /api/v1 only the base OpenAPI description answers without a key (spec, Authentication 1).
      for (const url of ['/api/v1/docs', '/api/v1/docs/json', '/api/v1/docs/static/swagger-ui-bundle.js']) {
        const refused = await t.app.inject({ method: 'GET', url })
        expect(refused.statusCode, url).toBe(401)
        expect(refused.json().errors[0].code, url).toBe('unauthorized')
      }
      // The reference pages are not part of the documented API.
      expect(Object.keys(base.json().paths).filter((p) => p.includes('/docs'))).toEqual([])
    })

    it('compresses responses over 1 KiB for clients that accept it, and leaves small ones alone', async () => {
      const plain = await t.app.inject({ method: 'GET', url: '/api/v1/assets?page[size]=50', headers: { authorization: `Bearer ${t.adminKey}` } })
      const gz = await t.app.inject({ method: 'GET', url: '/api/v1/assets?page[size]=50', headers: { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' } })
      expect(plain.headers['content-encoding']).toBeUndefined()
      expect(gz.headers['content-encoding']).toBe('gzip')
      expect(gz.headers.vary).toMatch(/accept-encoding/i)
      expect(gz.rawPayload.length).toBeLessThan(plain.rawPayload.length / 3)
      expect(JSON.parse(gunzipSync(gz.rawPayload).toString('utf8'))).toEqual(plain.json())
      const small = await t.app.inject({ method: 'GET', url: '/api/v1/assets?page[size]=1&fields=id', headers: { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' } })
      if (small.rawPayload.length < 1024) expect(small.headers['content-encoding']).toBeUndefined()
      const error = await t.app.inject({ method: 'GET', url: '/api/v1/assets/nope', headers: { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' } })
      expect([error.statusCode, error.headers['content-encoding'], error.json().errors[0].code]).toEqual([404, undefined, 'not_found'])
    })

    it('keeps the streaming export whole when compressed (NDJSON and CSV)', async () => {
      for (const format of ['ndjson', 'csv']) {
        const url = `/api/v1/export/assets?format=${format}&filter[asset_type_key]=server`
        const plain = await t.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${t.adminKey}` } })
        const gz = await t.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' } })
        expect(plain.statusCode).toBe(200)
        expect(gz.statusCode, JSON.stringify(gz.headers)).toBe(200)
        expect(gz.headers['content-encoding'], JSON.stringify(gz.headers)).toBe('gzip')
        expect(gunzipSync(gz.rawPayload).toString('utf8')).toBe(plain.body)
        expect(plain.body.split('\n').filter(Boolean)).toHaveLength(format === 'csv' ? 61 : 60)
      }
    })

    it('sends no CORS headers unless KBIS_CORS_ORIGINS is set', async () => {
      const preflight = await t.app.inject({ method: 'OPTIONS', url: '/api/v1/assets', headers: { origin: 'https://ui.example.com', 'access-control-request-method': 'GET' } })
      expect(preflight.headers['access-control-allow-origin']).toBeUndefined()
      const get = await t.app.inject({ method: 'GET', url: '/api/v1/assets', headers: { origin: 'https://ui.example.com', authorization: `Bearer ${t.adminKey}` } })
      expect(get.statusCode).toBe(200)
      expect(get.headers['access-control-allow-origin']).toBeUndefined()
    })
  })

  describe(`${store}: CORS with KBIS_CORS_ORIGINS`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, undefined, { corsOrigins: ['https://ui.example.com', 'http://localhost:5173'] })
    })
    afterAll(async () => t.close())

    it('answers preflights of a listed origin and marks its answers; other origins get no CORS headers', async () => {
      const preflight = await t.app.inject({
        method: 'OPTIONS', url: '/api/v1/assets',
        headers: { origin: 'https://ui.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
      })
      expect(preflight.statusCode).toBe(204)
      expect(preflight.headers['access-control-allow-origin']).toBe('https://ui.example.com')
      expect(String(preflight.headers['access-control-allow-methods'])).toContain('POST')
      expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization')

      const created = await t.app.inject({
        method: 'POST', url: '/api/v1/assets', payload: { asset_type_key: 'note', name: 'from a browser' },
        headers: { origin: 'http://localhost:5173', authorization: `Bearer ${t.adminKey}` },
      })
      expect(created.statusCode).toBe(201)
      expect(created.headers['access-control-allow-origin']).toBe('http://localhost:5173')
      expect(String(created.headers['access-control-expose-headers'])).toContain('Location')
      expect(String(created.headers['access-control-expose-headers'])).toContain('X-Request-Id')

      const other = await t.app.inject({ method: 'GET', url: '/api/v1/assets', headers: { origin: 'https://evil.example', authorization: `Bearer ${t.adminKey}` } })
      expect(other.statusCode).toBe(200)
      expect(other.headers['access-control-allow-origin']).toBeUndefined()
      // Errors carry the CORS headers too, so a browser can read them.
      const unauthorized = await t.app.inject({ method: 'GET', url: '/api/v1/assets', headers: { origin: 'https://ui.example.com' } })
      expect([unauthorized.statusCode, unauthorized.headers['access-control-allow-origin']]).toEqual([401, 'https://ui.example.com'])
    })

    it('answers an OPTIONS that is no preflight (no Origin, or no Access-Control-Request-Method) without an error outside the envelope', async () => {
      for (const headers of [{}, { origin: 'https://ui.example.com' }]) {
        const res = await t.app.inject({ method: 'OPTIONS', url: '/api/v1/assets', headers })
        expect(res.statusCode, JSON.stringify(headers)).toBe(204)
        expect(res.body).toBe('')
      }
    })
  })
}
