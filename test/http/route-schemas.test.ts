import Fastify from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { validatorCompiler } from '../../src/core/validators.js'
import { buildSerializer } from '../../src/core/serializer.js'
import { compilePending } from '../../src/core/compile-later.js'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

for (const store of STORES) {
  describe(`${store}: route schemas, compiled when a request first needs them`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      await t.app.ready()
    })
    afterAll(async () => t.close())

    it('every route\'s validation and response schemas compile, and none is left to compile after', async () => {
      expect(() => compilePending()).not.toThrow()
      expect(compilePending()).toBe(0)
      // The app answers as before with every schema compiled: a body refused by its schema, an answer serialized by its own.
      const refused = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'x', properties: {}, extra: 1 } })
      expect(refused.status).toBe(400)
      expect(refused.body.errors[0]).toMatchObject({ code: 'invalid_request', status: '400' })
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'schemas-compiled', properties: { body: 'b' } } })
      expect(created.status).toBe(201)
      expect(created.body.data).toMatchObject({ name: 'schemas-compiled', asset_type_key: 'note', properties: { body: 'b' } })
    })
  })
}

describe('a route schema the compilers refuse', () => {
  it('lets the app start, and is named when it is compiled: by its first request, or by the check above', async () => {
    const app = Fastify({ schemaController: { compilersFactory: { buildSerializer } } })
    app.setValidatorCompiler(validatorCompiler([]))
    app.post('/bad-body', { schema: { body: { type: 'object', properties: { a: { type: 'no-such-type' } } } } }, async () => ({ ok: true }))
    app.get('/bad-answer', { schema: { response: { 200: { type: 'object', properties: { a: { $ref: 'no-such-schema#' } } } } } }, async () => ({ a: 1 }))
    await app.ready()
    try {
      // In the order the routes were registered; a failed compile is not kept pending: another
      // app's check is not failed by this one.
      expect(() => compilePending()).toThrow(/^POST \/bad-body \(body\): schema is invalid: data\/properties\/a\/type must be equal to one of the allowed values/)
      expect(() => compilePending()).toThrow(/^GET \/bad-answer \(200\): .*no-such-schema/)
      expect(compilePending()).toBe(0)
      // Each request that needs it fails, as a defect of the server.
      for (const [method, url] of [['POST', '/bad-body'], ['GET', '/bad-answer'], ['POST', '/bad-body']] as const) {
        expect((await app.inject({ method, url, payload: method === 'POST' ? { a: 1 } : undefined })).statusCode, url).toBe(500)
      }
    } finally {
      await app.close()
    }
  })
})
