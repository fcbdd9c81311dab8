import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** A body nested deeper than 64 levels is refused with a clear 400, whatever its depth (no stack overflow). */
for (const store of STORES) {
  describe(`${store}: deeply nested bodies`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const send = (url: string, payload: string) =>
      t.app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })
    const detail = 'the body is nested too deeply: at most 64 levels of objects and arrays'

    it('answers 400 "nested too deeply" for bodies 20,000 deep, with or without suspect values', async () => {
      const n = 20_000
      const bodies: [string, string][] = [
        ['/api/v1/assets', `{"asset_type_key":"note","name":"n","properties":{"body":${'{"a":'.repeat(n)}1e99${'}'.repeat(n)}}}`],
        ['/api/v1/assets', `{"asset_type_key":"note","name":"n","properties":{"body":${'['.repeat(n)}"\\u0000"${']'.repeat(n)}}}`],
        ['/api/v1/assets', `{"asset_type_key":"note","name":"n","properties":{"body":${'['.repeat(n)}${']'.repeat(n)}}}`],
        ['/api/v1/bulk/assets', `${'['.repeat(n)}${']'.repeat(n)}`],
        ['/api/v1/search/assets', `{"filter":${'{"and":['.repeat(n)}{}${']}'.repeat(n)}}`],
      ]
      for (const [url, payload] of bodies) {
        const res = await send(url, payload)
        expect(res.statusCode, url).toBe(400)
        const error = res.json().errors[0]
        expect(error).toMatchObject({ status: '400', code: 'invalid_request', detail })
        expect(error.source.pointer.split('/').length - 1, url).toBe(64)
      }
      expect((await t.request('GET', '/api/v1/assets?filter[name]=n')).body.data).toEqual([])
    })

    it('accepts 64 levels and refuses 65', async () => {
      const nested = (depth: number) => `${'['.repeat(depth - 3)}${']'.repeat(depth - 3)}`
      // body(1) → properties(2) → body value: depth - 2 more arrays.
      const at = (depth: number) => send('/api/v1/assets', `{"asset_type_key":"note","name":"d","properties":{"body":${nested(depth + 1)}}}`)
      const ok = await at(64)
      expect(ok.statusCode).toBe(422)
      expect(ok.json().errors[0]).toMatchObject({ code: 'validation_failed', source: { pointer: '/properties/body' } })
      const deep = await at(65)
      expect(deep.statusCode).toBe(400)
      expect(deep.json().errors[0]).toMatchObject({ code: 'invalid_request', detail })
    })

    it('still finds unstorable values with their pointers, in document order', async () => {
      const res = await send('/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"a"},{"asset_type_key":"note","name":"b","properties":{"body":"\\u0000"}},{"asset_type_key":"note","name":"\\ud800"}]')
      expect(res.statusCode).toBe(400)
      expect(res.json().errors[0]).toMatchObject({ code: 'invalid_request', detail: 'text must not contain NUL (U+0000) characters', source: { pointer: '/1/properties/body' } })
    })

    it('refuses an array sent to a route that takes no items with its first problem, without the items\' meta of a bulk', async () => {
      const nul = 'text must not contain NUL (U+0000) characters'
      for (const [url, payload, pointer, found] of [
        ['/api/v1/search/assets', '[{"a":"\\u0000"},{"b":"\\u0000"}]', '/0/a', nul],
        ['/api/v1/analytics/assets', `[${'['.repeat(70)}${']'.repeat(70)}]`, `/0${'/0'.repeat(63)}`, detail],
        ['/api/v1/assets', '[{"__proto__":{}},{"constructor":{"prototype":{}}}]', '/0/__proto__', null],
      ] as const) {
        const res = await send(url, payload)
        expect(res.statusCode, url).toBe(400)
        const errors = res.json().errors
        expect(errors, url).toEqual([{ status: '400', code: 'invalid_request', detail: found ?? expect.any(String), source: { pointer }, meta: { request_id: expect.any(String) } }])
      }
      // A bulk route keeps listing each item with its index and client_ref (CONTRACT §5).
      const bulk = await send('/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"a","client_ref":"r0","properties":{"body":"\\u0000"}},{"asset_type_key":"note","name":"\\u0000"}]')
      expect(bulk.json().errors.map((e: { meta: unknown }) => e.meta)).toEqual([{ index: 0, client_ref: 'r0', request_id: expect.any(String) }, { index: 1, client_ref: null, request_id: expect.any(String) }])
    })
  })
}
