import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { applySetup } from '../../src/setup/apply.js'
import { ACME } from '../helpers/fixtures.js'
import { effectivePermission } from '../../src/core/auth/permissions.js'
import type { SetupFile } from '../../src/setup/schema.js'

const unauthorized = (detail: string) => ({ errors: [{ status: '401', code: 'unauthorized', detail }] })

describe('effective permission', () => {
  it('is the minimum of the key type and the owner type, Owner counting as Admin', () => {
    expect(effectivePermission('Admin', 'Editor')).toBe('Editor')
    expect(effectivePermission('Admin', 'Owner')).toBe('Admin')
    expect(effectivePermission('Editor', 'Admin')).toBe('Editor')
    expect(effectivePermission('Admin', 'Viewer')).toBe('Viewer')
    expect(effectivePermission('Viewer', 'Owner')).toBe('Viewer')
  })
})

for (const store of STORES) {
  describe(`${store}: authentication`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const setup = (mutate: (s: typeof ACME) => void) => {
      const copy = structuredClone(ACME)
      mutate(copy)
      return copy as unknown as SetupFile
    }

    it('answers 401 unauthorized with WWW-Authenticate when the header is missing or malformed', async () => {
      const missing = await t.request('GET', '/api/v1/assets', { key: null })
      expect(missing.status).toBe(401)
      expect(missing.headers['www-authenticate']).toBe('Bearer')
      expect(missing.body).toEqual(unauthorized('send an API key as "Authorization: Bearer <key>"'))
      for (const header of ['Basic abc', 'Bearer', 'token xyz', `Bearer ${t.adminKey} extra`]) {
        const res = await t.request('GET', '/api/v1/assets', { key: null, headers: { authorization: header } })
        expect(res.status, header).toBe(401)
        expect(res.body.errors[0].code).toBe('unauthorized')
      }
    })

    it('answers 401 for an unknown key and for a key with a wrong secret', async () => {
      const wrongSecret = t.adminKey.slice(0, -4) + (t.adminKey.endsWith('AAAA') ? 'BBBB' : 'AAAA')
      for (const key of ['kbis_000000000000_' + 'A'.repeat(43), wrongSecret, 'nonsense']) {
        const res = await t.request('GET', '/api/v1/assets', { key })
        expect(res.status).toBe(401)
        expect(res.body).toEqual(unauthorized('the API key is not valid'))
      }
    })

    it('stores only a hash of the secret', async () => {
      const rows = await t.store.db.query<{ secret_hash: Uint8Array; secret_prefix: string }>('SELECT secret_hash, secret_prefix FROM api_keys')
      for (const row of rows.rows) {
        expect(Buffer.from(row.secret_hash).toString('utf8')).not.toContain(row.secret_prefix)
        expect(row.secret_hash.length).toBe(32)
      }
      // kbis_ + 12 hex + _ = 18 characters, then the 43-character secret (base64url may hold `_`).
      const secret = t.adminKey.slice(18)
      expect(secret).toHaveLength(43)
      expect(JSON.stringify(rows.rows)).not.toContain(secret)
    })

    it('answers 401 once the key is deleted', async () => {
      const key = await t.givenKey({ type: 'Viewer' })
      expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
      await t.store.db.query('DELETE FROM api_keys WHERE secret_prefix = $1', [key.split('_')[1]])
      await t.store.db.notify('kbis_invalidate', t.orgId)
      expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(401)
    })

    it('answers 401 api_key_inactive when the owner is disabled or has no sign-in method', async () => {
      const key = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
      expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
      await applySetup(t.store.db, setup((s) => { s.users[2]!.enabled = false }))
      const disabled = await t.request('GET', '/api/v1/assets', { key })
      expect(disabled.status).toBe(401)
      expect(disabled.body.errors[0]).toEqual({
        status: '401', code: 'api_key_inactive', detail: "the API key's owner is disabled or has no active sign-in method",
      })
      await applySetup(t.store.db, setup((s) => { s.users[2]!.sign_in_methods = [] }))
      expect((await t.request('GET', '/api/v1/assets', { key })).body.errors[0].code).toBe('api_key_inactive')
      await applySetup(t.store.db, ACME as unknown as SetupFile)
      expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
    })

    it('answers 403 api_access_disabled when the plan has no API access', async () => {
      await applySetup(t.store.db, setup((s) => { s.organization.api_access = false }))
      const res = await t.request('GET', '/api/v1/assets')
      expect(res.status).toBe(403)
      expect(res.body.errors[0]).toEqual({ status: '403', code: 'api_access_disabled', detail: "the organization's plan has no API access" })
      await applySetup(t.store.db, ACME as unknown as SetupFile)
      expect((await t.request('GET', '/api/v1/assets')).status).toBe(200)
    })

    it('lets a Viewer key read but not write (403 forbidden), and nothing is written', async () => {
      const key = await t.givenKey({ type: 'Viewer' })
      const body = { asset_type_key: 'note', name: 'from viewer' }
      const res = await t.request('POST', '/api/v1/assets', { key, body })
      expect(res.status).toBe(403)
      expect(res.body.errors[0].code).toBe('forbidden')
      expect((await t.request('GET', '/api/v1/assets?filter[name]=from%20viewer')).body.data).toEqual([])
    })

    it('lets an Admin key owned by an Editor write like an Editor', async () => {
      const key = await t.givenKey({ user: 'editor@acme.test', type: 'Admin', roles: ['it_editor'] })
      const res = await t.request('POST', '/api/v1/assets', { key, body: { asset_type_key: 'note', name: 'editor note', access_domain_key: 'it' } })
      expect(res.status).toBe(201)
    })

    it('keeps an Admin key owned by a Viewer read-only', async () => {
      const key = await t.givenKey({ user: 'viewer@acme.test', type: 'Admin' })
      expect((await t.request('POST', '/api/v1/assets', { key, body: { asset_type_key: 'note', name: 'n' } })).status).toBe(403)
      expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
    })

    it('serves the base OpenAPI description without a key', async () => {
      const res = await t.request('GET', '/api/v1/openapi/base.json', { key: null })
      expect(res.status).toBe(200)
      expect(res.body.openapi).toBe('3.1.0')
    })
  })
}
