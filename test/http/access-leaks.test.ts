import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/**
 * A unique value taken by an asset the key cannot see: the 409 says that the value is taken (the
 * uniqueness is organization-wide, so that much is inherent) and nothing else — no id, name or
 * access domain of the holder — on every write path.
 */
for (const store of STORES) {
  describe(`${store}: what a 409 reveals to a restricted key`, () => {
    let t: TestApp
    let restricted = ''
    let holder: { id: string; name: string }
    let own = ''
    beforeAll(async () => {
      t = await createTestApp(store)
      // Role it_editor: edits the `it` domain, sees only servers of `finance`: not this application.
      restricted = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
      const res = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'application', name: 'Payroll Secret Project', access_domain_key: 'finance', properties: { code: 'payroll-x', owner: 'Zed Confidential' } },
      })
      expect(res.status).toBe(201)
      holder = res.body.data
      expect((await t.request('GET', `/api/v1/assets/${holder.id}`, { key: restricted })).status).toBe(404)
      own = (await t.request('POST', '/api/v1/assets', { key: restricted, body: { asset_type_key: 'application', name: 'mine', access_domain_key: 'it', properties: { code: 'mine' } } })).body.data.id
    })
    afterAll(async () => t.close())

    const leaks = (body: unknown): string[] => {
      const text = JSON.stringify(body)
      return [holder.id, 'Payroll', 'Secret', 'finance', 'Zed', 'Confidential'].filter((s) => text.includes(s))
    }

    it('answers 409 unique_violation on every write path, with no id, name or domain of the holder', async () => {
      const taken = { asset_type_key: 'application', name: 'clash', access_domain_key: 'it', properties: { code: 'payroll-x' } }
      const attempts: [string, string, unknown][] = [
        ['POST', '/api/v1/assets', taken],
        ['POST', '/api/v1/bulk/assets', [{ ...taken, client_ref: 'r1' }]],
        ['PATCH', `/api/v1/assets/${own}`, { properties: { code: 'payroll-x' } }],
        ['PATCH', '/api/v1/bulk/assets', [{ id: own, properties: { code: 'payroll-x' } }]],
      ]
      for (const [method, url, body] of attempts) {
        const res = await t.request(method, url, { key: restricted, body })
        expect(res.status, `${method} ${url}`).toBe(409)
        expect(res.body.errors.map((e: { code: string }) => e.code)).toEqual(['unique_violation'])
        expect(leaks(res.body), `${method} ${url}: ${JSON.stringify(res.body)}`).toEqual([])
        expect(leaks(res.headers), `${method} ${url}`).toEqual([])
        for (const error of res.body.errors) {
          expect(Object.keys(error).sort()).toEqual(expect.arrayContaining(['code', 'detail', 'status']))
          expect(Object.keys(error.meta ?? {}).filter((k) => !['index', 'client_ref'].includes(k))).toEqual([])
        }
      }
      // Upsert by the taken composite key: the holder is invisible to the key; whatever the answer
      // (404 as for any invisible asset, or 409), it names nothing of the holder and changes nothing.
      const put = await t.request('PUT', '/api/v1/assets/application:code:payroll-x', { key: restricted, body: { name: 'overwrite', access_domain_key: 'it', properties: {} } })
      expect([404, 409], JSON.stringify(put.body)).toContain(put.status)
      expect(leaks(put.body)).toEqual([])
      expect((await t.request('GET', `/api/v1/assets/${holder.id}`)).body.data.name).toBe('Payroll Secret Project')
      // Nothing was written.
      expect((await t.request('GET', `/api/v1/assets/${own}`, { key: restricted })).body.data.properties.code).toBe('mine')
    })
  })
}
