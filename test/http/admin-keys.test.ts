import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/
const forbidden = (detail: string, pointer?: string) => ({
  status: '403', code: 'forbidden', detail, ...(pointer ? { source: { pointer } } : {}),
})

for (const store of STORES) {
  describe(`${store}: API key administration`, () => {
    let t: TestApp
    const users: Record<string, string> = {}
    let editorKey: string
    let viewerKey: string

    beforeAll(async () => {
      t = await createTestApp(store)
      for (const u of (await t.request('GET', '/api/v1/users')).body.data) users[u.email.split('@')[0]] = u.id
      editorKey = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      viewerKey = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
    })
    afterAll(async () => t.close())

    const create = (body: object, key?: string) => t.request('POST', '/api/v1/api-keys', { body, ...(key ? { key } : {}) })

    it('creates a key and shows its secret once, in the 201 only', async () => {
      const res = await create({ name: 'ci', description: 'deploys', permission_type: 'Editor', role_keys: ['all'] })
      expect(res.status).toBe(201)
      const { secret, ...record } = res.body.data
      expect(record).toEqual({
        id: expect.any(String), name: 'ci', description: 'deploys', permission_type: 'Editor', role_keys: ['all'],
        owner_user_id: users.owner, secret_prefix: `kbis_${secret.split('_')[1]}`, created_at: expect.stringMatching(TIMESTAMP),
        updated_at: record.created_at, last_used_at: null,
      })
      expect(secret).toMatch(/^kbis_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/)
      expect(secret.startsWith(record.secret_prefix)).toBe(true)
      // Read and listed before the key is used: its use sets last_used_at at the next flush (every
      // second), which could fall between the two reads.
      const read = await t.request('GET', `/api/v1/api-keys/${record.id}`)
      expect(read.body).toEqual({ data: record })
      const list = await t.request('GET', '/api/v1/api-keys?page[size]=100')
      expect(list.body.data.find((k: { id: string }) => k.id === record.id)).toEqual(record)
      expect(JSON.stringify(list.body)).not.toContain(secret)
      expect((await t.request('GET', '/api/v1/assets', { key: secret })).status).toBe(200)
    })

    it('answers 403 to a Viewer key on every key route', async () => {
      const detail = 'a Viewer key cannot manage API keys'
      for (const [method, url, body] of [
        ['GET', '/api/v1/api-keys', undefined],
        ['POST', '/api/v1/api-keys', { name: 'x', permission_type: 'Viewer', role_keys: ['all'] }],
        ['GET', `/api/v1/api-keys/${users.owner}`, undefined],
        ['DELETE', `/api/v1/api-keys/${users.owner}`, undefined],
        // Refused before the body, the query or the id is read, as every write of a Viewer is.
        ['POST', '/api/v1/api-keys', { zzz: 1 }],
        ['POST', '/api/v1/api-keys', { name: 'x', permission_type: 'Viewer', role_keys: [] }],
        ['PATCH', `/api/v1/api-keys/${users.owner}`, { name: '' }],
        ['GET', '/api/v1/api-keys?page[size]=0', undefined],
        ['DELETE', '/api/v1/api-keys/not-a-uuid', undefined],
      ] as const) {
        const res = await t.request(method, url, { key: viewerKey, ...(body ? { body } : {}) })
        expect(res.status, `${method} ${url}`).toBe(403)
        expect(res.body).toEqual({ errors: [forbidden(detail)] })
      }
    })

    it('lets an Editor see and manage only its own keys; other keys answer 404', async () => {
      const own = await create({ name: 'mine', permission_type: 'Viewer', role_keys: ['it_editor'] }, editorKey)
      expect(own.status).toBe(201)
      expect(own.body.data.owner_user_id).toBe(users.editor)
      const list = await t.request('GET', '/api/v1/api-keys', { key: editorKey })
      expect(list.status).toBe(200)
      expect(list.body.data.map((k: { owner_user_id: string }) => k.owner_user_id)).toEqual([users.editor, users.editor])
      const others = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.filter((k: { owner_user_id: string }) => k.owner_user_id !== users.editor)
      expect(others.length).toBeGreaterThan(0)
      const id = others[0].id
      for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'stolen' }], ['DELETE', undefined]] as const) {
        const res = await t.request(method, `/api/v1/api-keys/${id}`, { key: editorKey, ...(body ? { body } : {}) })
        expect(res.status, method).toBe(404)
        expect(res.body).toEqual({ errors: [{ status: '404', code: 'not_found', detail: `API key ${id} not found` }] })
      }
      expect((await t.request('GET', `/api/v1/api-keys/${id}`)).body.data.name).not.toBe('stolen')
    })

    it('lets an Admin key see every key of the organization', async () => {
      const all = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body
      const owners = new Set(all.data.map((k: { owner_user_id: string }) => k.owner_user_id))
      expect(owners).toEqual(new Set([users.owner, users.editor, users.viewer]))
      expect(all.meta.page.total_items).toBe(all.data.length)
    })

    it('refuses a permission type above the creating key\'s effective one', async () => {
      const res = await create({ name: 'escalate', permission_type: 'Admin', role_keys: ['it_editor'] }, editorKey)
      expect(res.status).toBe(403)
      expect(res.body).toEqual({ errors: [forbidden('a key acting as Editor cannot give a key the Admin permission type', '/permission_type')] })
      // An Admin key owned by an Editor acts as an Editor: same ceiling, and only its own keys.
      const adminOfEditor = await t.givenKey({ user: 'editor@acme.test', type: 'Admin', roles: ['it_editor'] })
      expect((await create({ name: 'x', permission_type: 'Admin', role_keys: ['it_editor'] }, adminOfEditor)).status).toBe(403)
      const own = (await t.request('GET', '/api/v1/api-keys?page[size]=100', { key: adminOfEditor })).body.data
      expect(own.every((k: { owner_user_id: string }) => k.owner_user_id === users.editor)).toBe(true)
      expect((await create({ name: 'ok', permission_type: 'Editor', role_keys: ['it_editor'] }, editorKey)).status).toBe(201)
    })

    it('lets an Editor assign only roles the Editor has', async () => {
      const res = await create({ name: 'wide', permission_type: 'Viewer', role_keys: ['it_editor', 'all'] }, editorKey)
      expect(res.status).toBe(403)
      expect(res.body).toEqual({
        errors: [forbidden('user editor@acme.test does not have the role all; a key gets only roles its owner has', '/role_keys/1')],
      })
    })

    it('lets an Admin create a key for another user, within that user\'s roles', async () => {
      const lacking = await create({ name: 'for editor', permission_type: 'Editor', role_keys: ['all'], owner_user_id: users.editor })
      expect(lacking.status).toBe(403)
      expect(lacking.body.errors[0].detail).toBe('user editor@acme.test does not have the role all; a key gets only roles its owner has')
      const ok = await create({ name: 'for editor', permission_type: 'Editor', role_keys: ['it_editor'], owner_user_id: users.editor })
      expect(ok.status).toBe(201)
      expect(ok.body.data.owner_user_id).toBe(users.editor)
      const byEditor = await create({ name: 'for viewer', permission_type: 'Viewer', role_keys: ['it_editor'], owner_user_id: users.viewer }, editorKey)
      expect(byEditor.status).toBe(403)
      expect(byEditor.body).toEqual({ errors: [forbidden('only an Admin key may give a key to another user', '/owner_user_id')] })
    })

    it('answers 422 for unknown roles and owners, 400 for unknown fields', async () => {
      const role = await create({ name: 'x', permission_type: 'Viewer', role_keys: ['all', 'nope'] })
      expect(role.status).toBe(422)
      expect(role.body).toEqual({ errors: [{ status: '422', code: 'validation_failed', detail: 'no role nope in the organization', source: { pointer: '/role_keys/1' } }] })
      const owner = await create({ name: 'x', permission_type: 'Viewer', role_keys: ['all'], owner_user_id: '00000000-0000-7000-8000-000000000000' })
      expect(owner.status).toBe(422)
      expect(owner.body.errors[0].source).toEqual({ pointer: '/owner_user_id' })
      for (const body of [{ name: 'x', permission_type: 'Viewer', role_keys: [] }, { name: 'x', permission_type: 'Root', role_keys: ['all'] }, { permission_type: 'Viewer', role_keys: ['all'] }]) {
        const res = await create(body)
        expect(res.status, JSON.stringify(body)).toBe(422)
        expect(res.body.errors[0].code).toBe('validation_failed')
      }
      const twice = await create({ name: 'x', permission_type: 'Viewer', role_keys: ['all', 'all'] })
      expect(twice.body).toEqual({ errors: [{ status: '422', code: 'validation_failed', detail: 'role_keys must not list the same value twice (entries 0 and 1 are equal)', source: { pointer: '/role_keys/1' } }] })
      // A name of blanks alone is no name, on create and on PATCH (as the CLI and the console say).
      const blank = { errors: [{ status: '422', code: 'validation_failed', detail: 'name must not be empty (blanks alone are no name)', source: { pointer: '/name' } }] }
      const before = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.meta.page.total_items
      expect(await create({ name: ' \t\n ', permission_type: 'Viewer', role_keys: ['all'] })).toMatchObject({ status: 422, body: blank })
      const named = await create({ name: ' kept ', permission_type: 'Viewer', role_keys: ['all'] })
      expect(named.status).toBe(201)
      const renamed = await t.request('PATCH', `/api/v1/api-keys/${named.body.data.id}`, { body: { name: '   ' } })
      expect(renamed).toMatchObject({ status: 422, body: blank })
      expect((await t.request('GET', `/api/v1/api-keys/${named.body.data.id}`)).body.data.name).toBe(' kept ')
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.meta.page.total_items).toBe(before + 1)
      const unknown = await create({ name: 'x', permission_type: 'Viewer', role_keys: ['all'], secret: 'mine' })
      expect(unknown.status).toBe(400)
      expect(unknown.body.errors[0].code).toBe('invalid_request')
    })

    it('updates name, description, permission type and roles; the change applies at once', async () => {
      const created = (await create({ name: 'old', permission_type: 'Editor', role_keys: ['all'] })).body.data
      const write = () => t.request('POST', '/api/v1/assets', { key: created.secret, body: { asset_type_key: 'note', name: 'n' } })
      expect((await write()).status).toBe(201)
      const res = await t.request('PATCH', `/api/v1/api-keys/${created.id}`, {
        body: { name: 'new', description: 'read only now', permission_type: 'Viewer', role_keys: ['it_editor'] },
      })
      expect(res.status).toBe(200)
      // last_used_at may have been flushed meanwhile (every 5 s); it is checked on its own below.
      const { secret: _secret, last_used_at: _used, ...before } = created
      const { last_used_at: _usedNow, ...after } = res.body.data
      expect(after).toEqual({
        ...before, name: 'new', description: 'read only now', permission_type: 'Viewer', role_keys: ['it_editor'],
        updated_at: expect.stringMatching(TIMESTAMP),
      })
      expect(res.body.data).not.toHaveProperty('secret')
      expect((await write()).status).toBe(403)
      const cleared = await t.request('PATCH', `/api/v1/api-keys/${created.id}`, { body: { description: null } })
      expect(cleared.body.data).toMatchObject({ name: 'new', description: null, permission_type: 'Viewer' })
    })

    it('writes nothing for a PATCH that changes nothing: updated_at kept, no event (as for assets)', async () => {
      const created = (await create({ name: 'same', permission_type: 'Editor', role_keys: ['all'] })).body.data
      await t.store.db.query(`UPDATE api_keys SET updated_at = '2020-01-01T00:00:00Z' WHERE id = $1`, [created.id])
      const events = async () => (await t.request('GET', `/api/v1/events?filter[subject]=api-keys/${created.id}`)).body.data.map((e: { type: string }) => e.type)
      await t.settled()
      expect(await events()).toEqual(['api_key.created'])
      for (const body of [{}, { name: 'same' }, { name: 'same', description: null, permission_type: 'Editor', role_keys: ['all'], owner_user_id: users.owner }]) {
        const res = await t.request('PATCH', `/api/v1/api-keys/${created.id}`, { body })
        expect(res.status, JSON.stringify(body)).toBe(200)
        expect(res.body.data.updated_at, JSON.stringify(body)).toBe('2020-01-01T00:00:00Z')
      }
      const renamed = await t.request('PATCH', `/api/v1/api-keys/${created.id}`, { body: { name: 'other' } })
      expect(renamed.body.data.updated_at).not.toBe('2020-01-01T00:00:00Z')
      await t.settled()
      expect(await events()).toEqual(['api_key.created', 'api_key.updated'])
    })

    it('lets a key below Admin grant only roles it holds itself, even when its owner holds more (CONTRACT §9)', async () => {
      // The owner (an Owner user) holds all and it_editor; this Editor key of theirs holds it_editor only.
      const narrow = await t.givenKey({ user: 'owner@acme.test', type: 'Editor', roles: ['it_editor'] })
      const res = await create({ name: 'mint', permission_type: 'Editor', role_keys: ['it_editor', 'all'] }, narrow)
      expect(res.status).toBe(403)
      expect(res.body).toEqual({
        errors: [forbidden('this key does not hold the role all; a key acting as Editor grants only roles it holds itself', '/role_keys/1')],
      })
      const own = (await create({ name: 'narrow', permission_type: 'Viewer', role_keys: ['it_editor'] }, narrow)).body.data
      expect(own.role_keys).toEqual(['it_editor'])
      const widen = await t.request('PATCH', `/api/v1/api-keys/${own.id}`, { key: narrow, body: { role_keys: ['all'] } })
      expect(widen.status).toBe(403)
      expect(widen.body.errors[0].source).toEqual({ pointer: '/role_keys/0' })
      // A role the key holds already grants nothing when sent back: only added roles are checked.
      const wide = (await create({ name: 'wide of the same user', permission_type: 'Viewer', role_keys: ['all'] })).body.data
      const roles = async (role_keys: string[]) => t.request('PATCH', `/api/v1/api-keys/${wide.id}`, { key: narrow, body: { role_keys } })
      expect((await roles(['all'])).status).toBe(200)
      expect((await roles(['all', 'it_editor'])).body.data.role_keys).toEqual(['all', 'it_editor'])
      expect((await roles(['it_editor'])).body.data.role_keys).toEqual(['it_editor'])
      const back = await roles(['it_editor', 'all'])
      expect(back.status).toBe(403)
      expect(back.body.errors.map((e: { source: unknown }) => e.source)).toEqual([{ pointer: '/role_keys/1' }])
      // Raising a key's type grants its roles anew: not one whose roles it does not hold (the
      // Viewer key of `all` would write where the narrow key may not), one whose roles it holds yes.
      const raise = await t.request('PATCH', `/api/v1/api-keys/${wide.id}`, { key: narrow, body: { role_keys: ['it_editor', 'all'], permission_type: 'Editor' } })
      expect(raise.status).toBe(403)
      const viewerOfAll = (await create({ name: 'viewer of all', permission_type: 'Viewer', role_keys: ['all', 'it_editor'] })).body.data
      const raised = await t.request('PATCH', `/api/v1/api-keys/${viewerOfAll.id}`, { key: narrow, body: { permission_type: 'Editor' } })
      expect(raised.body).toEqual({
        errors: [forbidden('raising the key to Editor grants its role all anew, which this key does not hold; a key acting as Editor grants only roles it holds itself', '/permission_type')],
      })
      expect((await t.request('GET', `/api/v1/api-keys/${viewerOfAll.id}`)).body.data.permission_type).toBe('Viewer')
      expect((await t.request('PATCH', `/api/v1/api-keys/${own.id}`, { key: narrow, body: { permission_type: 'Editor' } })).body.data.permission_type).toBe('Editor')
      // Lowering or renaming it changes no power: allowed.
      expect((await t.request('PATCH', `/api/v1/api-keys/${viewerOfAll.id}`, { key: narrow, body: { name: 'renamed' } })).status).toBe(200)
      // An Admin key grants any role its owner holds.
      expect((await create({ name: 'wide', permission_type: 'Editor', role_keys: ['all'] })).status).toBe(201)
      expect((await t.request('PATCH', `/api/v1/api-keys/${viewerOfAll.id}`, { body: { permission_type: 'Editor' } })).status).toBe(200)
    })

    it('holds a key that grants to the rights it has when the grant is written, not those it was authenticated with', async () => {
      // A key whose role `all` is taken away (here in the store itself, as a concurrent Admin PATCH
      // commits) while its own request, authenticated before, runs: it cannot give itself `all` back.
      const self = (await create({ name: 'self-grant', permission_type: 'Editor', role_keys: ['all'] })).body
      const selfKey: string = self.data.secret ?? self.secret
      expect((await t.request('GET', `/api/v1/api-keys/${self.data.id}`, { key: selfKey })).status).toBe(200)
      await t.store.db.query(`UPDATE api_keys SET role_keys = '{it_editor}' WHERE id = $1`, [self.data.id])
      // Judged with the key as it is when the grant is written (this process's cached copy still
      // holds `all`): the 403 of a key without `all`, not a 503 to send again.
      const refused = () => ({ status: 403, code: 'forbidden', detail: 'this key does not hold the role all; a key acting as Editor grants only roles it holds itself' })
      const regrant = await t.request('PATCH', `/api/v1/api-keys/${self.data.id}`, { key: selfKey, body: { name: 'self-grant', role_keys: ['all'] } })
      expect({ status: regrant.status, code: regrant.body.errors?.[0]?.code, detail: regrant.body.errors?.[0]?.detail }).toEqual(refused())
      expect((await t.request('GET', `/api/v1/api-keys/${self.data.id}`)).body.data.role_keys).toEqual(['it_editor'])
      // Sent again, it is judged with the key as it is now: 403.
      expect((await t.request('PATCH', `/api/v1/api-keys/${self.data.id}`, { key: selfKey, body: { role_keys: ['all'] } })).status).toBe(403)
      // The same for a key it would mint.
      expect((await t.request('PATCH', `/api/v1/api-keys/${self.data.id}`, { body: { role_keys: ['all'] } })).status).toBe(200)
      expect((await t.request('GET', `/api/v1/api-keys/${self.data.id}`, { key: selfKey })).body.data.role_keys).toEqual(['all'])
      await t.store.db.query(`UPDATE api_keys SET role_keys = '{it_editor}' WHERE id = $1`, [self.data.id])
      const mint = await create({ name: 'minted', permission_type: 'Editor', role_keys: ['all'] }, selfKey)
      expect({ status: mint.status, code: mint.body.errors?.[0]?.code, detail: mint.body.errors?.[0]?.detail }).toEqual(refused())
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.some((k: { name: string }) => k.name === 'minted')).toBe(false)
    })

    it('applies the ceilings to PATCH', async () => {
      const own = (await create({ name: 'own', permission_type: 'Viewer', role_keys: ['it_editor'] }, editorKey)).body.data
      const url = `/api/v1/api-keys/${own.id}`
      expect((await t.request('PATCH', url, { key: editorKey, body: { permission_type: 'Admin' } })).status).toBe(403)
      expect((await t.request('PATCH', url, { key: editorKey, body: { role_keys: ['all'] } })).status).toBe(403)
      expect((await t.request('PATCH', url, { key: editorKey, body: { owner_user_id: users.viewer } })).body).toEqual({
        errors: [forbidden('only an Admin key may give a key to another user', '/owner_user_id')],
      })
      const ok = await t.request('PATCH', url, { key: editorKey, body: { permission_type: 'Editor', owner_user_id: users.editor } })
      expect(ok.status).toBe(200)
      expect(ok.body.data.permission_type).toBe('Editor')
    })

    it('lets an Admin transfer a key, checking the roles against the new owner', async () => {
      const key = (await create({ name: 'transfer me', permission_type: 'Editor', role_keys: ['all'] })).body.data
      const url = `/api/v1/api-keys/${key.id}`
      const refused = await t.request('PATCH', url, { body: { owner_user_id: users.editor } })
      expect(refused.status).toBe(403)
      expect(refused.body.errors[0].detail).toBe('user editor@acme.test does not have the role all; a key gets only roles its owner has')
      const moved = await t.request('PATCH', url, { body: { owner_user_id: users.editor, role_keys: ['it_editor'] } })
      expect(moved.status).toBe(200)
      expect(moved.body.data).toMatchObject({ owner_user_id: users.editor, role_keys: ['it_editor'] })
      expect((await t.request('GET', url, { key: editorKey })).status).toBe(200)
      // The key now acts with its new owner's type: an Editor key of an Editor cannot read users.
      expect((await t.request('GET', '/api/v1/users', { key: key.secret })).status).toBe(403)
    })

    it('deletes a key: 204, it stops working at once, and it is gone', async () => {
      const key = (await create({ name: 'leaked', permission_type: 'Viewer', role_keys: ['all'] })).body.data
      expect((await t.request('GET', '/api/v1/assets', { key: key.secret })).status).toBe(200)
      const res = await t.request('DELETE', `/api/v1/api-keys/${key.id}`)
      expect(res.status).toBe(204)
      expect(res.body).toBeNull()
      const after = await t.request('GET', '/api/v1/assets', { key: key.secret })
      expect(after.status).toBe(401)
      expect(after.body.errors[0].code).toBe('unauthorized')
      expect((await t.request('GET', `/api/v1/api-keys/${key.id}`)).status).toBe(404)
      expect((await t.request('DELETE', `/api/v1/api-keys/${key.id}`)).status).toBe(404)
      expect((await t.request('GET', '/api/v1/api-keys/not-a-uuid')).status).toBe(404)
    })

    it('lets an Editor delete its own key', async () => {
      const own = (await create({ name: 'temp', permission_type: 'Viewer', role_keys: ['it_editor'] }, editorKey)).body.data
      expect((await t.request('DELETE', `/api/v1/api-keys/${own.id}`, { key: editorKey })).status).toBe(204)
    })

    it('records last_used_at in batches, not on every request', async () => {
      const key = (await create({ name: 'used', permission_type: 'Viewer', role_keys: ['all'] })).body.data
      expect(key.last_used_at).toBeNull()
      expect((await t.request('GET', '/api/v1/assets', { key: key.secret })).status).toBe(200)
      await t.app.authenticator.flushLastUsed()
      const read = (await t.request('GET', `/api/v1/api-keys/${key.id}`)).body.data
      expect(read.last_used_at).toMatch(TIMESTAMP)
      expect(Date.parse(read.last_used_at)).toBeGreaterThanOrEqual(Date.parse(key.created_at))
    })

    it('pages the list with meta and links', async () => {
      const res = await t.request('GET', '/api/v1/api-keys?page[size]=2&page[number]=2')
      expect(res.status).toBe(200)
      expect(res.body.data).toHaveLength(2)
      expect(res.body.meta.page).toMatchObject({ number: 2, size: 2 })
      expect(res.body.links.prev).toContain('page[number]=1')
      expect((await t.request('GET', '/api/v1/api-keys?page[size]=101')).body.errors[0].code).toBe('invalid_page')
    })
  })
}
