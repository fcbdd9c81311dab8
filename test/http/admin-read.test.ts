import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/

for (const store of STORES) {
  describe(`${store}: roles, access domains and users`, () => {
    let t: TestApp
    let editorKey: string
    let viewerKey: string

    beforeAll(async () => {
      t = await createTestApp(store)
      editorKey = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      viewerKey = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
    })
    afterAll(async () => t.close())

    const roles = ACME.roles.map((r) => ({ ...r, description: null }))

    it('lists roles with their grants to any key, ordered by key', async () => {
      for (const key of [t.adminKey, editorKey, viewerKey]) {
        const res = await t.request('GET', '/api/v1/roles', { key })
        expect(res.status).toBe(200)
        expect(res.body.data).toEqual(roles)
        expect(res.body.meta).toEqual({ page: { number: 1, size: 50, total_items: 2, total_items_exact: true, total_pages: 1 } })
        expect(res.body.links.next).toBeNull()
      }
    })

    it('reads one role; an unknown one is 404', async () => {
      expect((await t.request('GET', '/api/v1/roles/it_editor', { key: viewerKey })).body).toEqual({ data: roles[1] })
      const missing = await t.request('GET', '/api/v1/roles/nope')
      expect(missing.status).toBe(404)
      expect(missing.body).toEqual({ errors: [{ status: '404', code: 'not_found', detail: 'role nope not found' }] })
    })

    it('lists and reads access domains', async () => {
      const list = await t.request('GET', '/api/v1/access-domains', { key: viewerKey })
      expect(list.body.data).toEqual([
        { key: 'finance', name: 'Finance', description: null },
        { key: 'it', name: 'IT', description: null },
      ])
      expect((await t.request('GET', '/api/v1/access-domains/it')).body).toEqual({ data: { key: 'it', name: 'IT', description: null } })
      expect((await t.request('GET', '/api/v1/access-domains/hr')).status).toBe(404)
    })

    it('pages roles', async () => {
      const res = await t.request('GET', '/api/v1/roles?page[size]=1&page[number]=2')
      expect(res.body.data).toEqual([roles[1]])
      expect(res.body.meta.page).toEqual({ number: 2, size: 1, total_items: 2, total_items_exact: true, total_pages: 2 })
      expect(res.body.links.next).toBeNull()
      expect(res.body.links.prev).toContain('page[number]=1')
    })

    it('lists users to Admin keys', async () => {
      const res = await t.request('GET', '/api/v1/users')
      expect(res.status).toBe(200)
      expect(res.body.data).toEqual(ACME.users.map((u) => ({ id: expect.any(String), created_at: expect.stringMatching(TIMESTAMP), ...u })))
      const one = await t.request('GET', `/api/v1/users/${res.body.data[1].id}`)
      expect(one.body).toEqual({ data: res.body.data[1] })
    })

    it('answers 403 on users to Editor and Viewer keys and to an Admin key owned by an Editor', async () => {
      const adminOfEditor = await t.givenKey({ user: 'editor@acme.test', type: 'Admin', roles: ['it_editor'] })
      for (const key of [editorKey, viewerKey, adminOfEditor]) {
        for (const url of ['/api/v1/users', `/api/v1/users/${'0'.repeat(8)}-0000-7000-8000-${'0'.repeat(12)}`]) {
          const res = await t.request('GET', url, { key })
          expect(res.status).toBe(403)
          expect(res.body.errors[0].code).toBe('forbidden')
        }
      }
    })

    it('answers 404 for an unknown user id', async () => {
      expect((await t.request('GET', '/api/v1/users/00000000-0000-7000-8000-000000000000')).status).toBe(404)
      expect((await t.request('GET', '/api/v1/users/owner@acme.test')).status).toBe(404)
    })
  })
}
