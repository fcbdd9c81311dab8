import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { applySetup } from '../../src/setup/apply.js'
import { ACME } from '../helpers/fixtures.js'
import { effectivePermission } from '../../src/core/auth/permissions.js'
import type { SetupFile } from '../../src/setup/schema.js'
import type { FastifyRequest } from 'fastify'
import { Authenticator } from '../../src/core/auth/authenticate.js'
import { AppError } from '../../src/core/errors.js'

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
      // Twice, even with a valid key first: which one a proxy in front read is not sure.
      const twice = await t.app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: [`Bearer ${t.adminKey}`, 'Bearer x'] as unknown as string } })
      expect([twice.statusCode, twice.json().errors[0].code]).toEqual([401, 'unauthorized'])
      const once = await t.app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(once.statusCode).toBe(200)
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

describe.runIf(STORES.includes('postgres'))('postgres: a key revoked or changed by another process (CONTRACT §17)', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await createTestApp('postgres')
  })
  afterAll(async () => t.close())

  // Another process's change, whose notification has not reached this one: the store changes
  // and this process's cache does not hear of it.
  const elsewhere = (sql: string, params: unknown[]) => t.store.db.query(sql, params)
  const keyIdOf = async (secret: string) => (await t.request('GET', '/api/v1/api-keys', { key: t.adminKey })).body.data.find((k: { secret_prefix: string }) => secret.startsWith(k.secret_prefix)).id as string
  const note = (name: string) => ({ asset_type_key: 'note', name })
  const notes = async (name: string) => (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE name = $1', [name])).rows[0]!.n

  it('refuses the writes of a key deleted elsewhere at once, with 401, writing nothing', async () => {
    const key = await t.givenKey({ type: 'Editor' })
    expect((await t.request('POST', '/api/v1/assets', { key, body: note('before revoke') })).status).toBe(201)
    await elsewhere('DELETE FROM api_keys WHERE id = $1', [await keyIdOf(key)])
    const after = await t.request('POST', '/api/v1/assets', { key, body: note('after revoke') })
    expect(after.status).toBe(401)
    expect(after.body).toEqual(unauthorized('the API key is not valid'))
    expect(await notes('after revoke')).toBe(0)
    // The cache was emptied: reads fail too from then on.
    expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(401)
  })

  it('judges a write of a key downgraded elsewhere with its new permission type, writing nothing', async () => {
    const key = await t.givenKey({ type: 'Editor' })
    expect((await t.request('POST', '/api/v1/assets', { key, body: note('editor write') })).status).toBe(201)
    await elsewhere("UPDATE api_keys SET permission_type = 'Viewer' WHERE id = $1", [await keyIdOf(key)])
    // This process still holds the Editor key (no notification arrived): the write is judged with
    // the key as the store holds it, the 403 of a Viewer; never written.
    const forbidden = { status: '403', code: 'forbidden', detail: 'this requires the Editor permission; the key acts as Viewer' }
    const racing = await t.request('POST', '/api/v1/assets', { key, body: note('downgraded write') })
    expect({ status: racing.status, error: racing.body.errors[0] }).toMatchObject({ status: 403, error: forbidden })
    const again = await t.request('POST', '/api/v1/assets', { key, body: note('downgraded write') })
    expect(again.status).toBe(403)
    expect(await notes('downgraded write')).toBe(0)
  })

  it('judges a write of a key raised elsewhere with its new permission type: written at once (outside audit: 403 before)', async () => {
    const key = await t.givenKey({ type: 'Viewer' })
    expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
    expect((await t.request('POST', '/api/v1/assets', { key, body: note('viewer write') })).status).toBe(403)
    await elsewhere("UPDATE api_keys SET permission_type = 'Editor' WHERE id = $1", [await keyIdOf(key)])
    const raised = await t.request('POST', '/api/v1/assets', { key, body: note('raised write') })
    expect(raised.status).toBe(201)
    expect(await notes('raised write')).toBe(1)
  })

  it('confirms a cached key against the store: the key as it is now when its powers changed, and the cache emptied', async () => {
    const key = await t.givenKey({ type: 'Editor' })
    const authenticator = new Authenticator(t.store.db)
    const request = { headers: { authorization: `Bearer ${key}` }, ip: '127.0.0.1' } as unknown as FastifyRequest
    const auth = await authenticator.authenticate(request)
    await expect(authenticator.confirm(t.store.db, auth)).resolves.toBe(auth)
    await elsewhere("UPDATE api_keys SET permission_type = 'Viewer' WHERE id = $1", [auth.keyId])
    const now = await authenticator.confirm(t.store.db, auth)
    expect({ keyId: now.keyId, permission: now.permission, keyPermission: now.keyPermission }).toEqual({ keyId: auth.keyId, permission: 'Viewer', keyPermission: 'Viewer' })
    // Emptied: the key is read again, as a Viewer now.
    expect((await authenticator.authenticate(request)).permission).toBe('Viewer')
    // Revoked: 401, whatever the cache holds.
    await elsewhere('DELETE FROM api_keys WHERE id = $1', [auth.keyId])
    const revoked = await authenticator.confirm(t.store.db, now).catch((err: unknown) => err)
    expect(revoked).toBeInstanceOf(AppError)
    expect(revoked).toMatchObject({ def: { status: 401, code: 'unauthorized' } })
  })

  it('refuses the writes of a key whose owner was disabled elsewhere with 401 api_key_inactive', async () => {
    const key = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
    const inIt = (name: string) => ({ ...note(name), access_domain_key: 'it' })
    expect((await t.request('POST', '/api/v1/assets', { key, body: inIt('enabled owner') })).status).toBe(201)
    await elsewhere("UPDATE users SET enabled = false WHERE email = 'editor@acme.test'", [])
    const after = await t.request('POST', '/api/v1/assets', { key, body: inIt('disabled owner') })
    expect(after.status).toBe(401)
    expect(after.body.errors[0]).toMatchObject({ code: 'api_key_inactive' })
    expect(await notes('disabled owner')).toBe(0)
  })

  const userId = async (email: string) => (await t.store.db.query<{ id: string }>('SELECT id FROM users WHERE email = $1', [email])).rows[0]!.id
  // The tests above disable the editor: enabled again (and every process told) before each below.
  const editorEnabled = async () => {
    await t.store.db.query("UPDATE users SET enabled = true WHERE email = 'editor@acme.test'")
    t.app.authenticator.invalidate()
  }

  it('acts for the new owner of a key transferred elsewhere: its writes, the keys it manages and mints, and its events (outside audit)', async () => {
    await editorEnabled()
    // Another Editor with the same roles: only the owner changes, not what the key may do.
    const twin = structuredClone(ACME) as unknown as SetupFile
    twin.users = [...(twin.users ?? []), { email: 'editor2@acme.test', name: 'Editor two', permission_type: 'Editor', role_keys: ['it_editor'], enabled: true, sign_in_methods: ['password'] }]
    await applySetup(t.store.db, twin)
    const key = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
    const other = await t.givenKey({ type: 'Viewer', user: 'editor@acme.test', roles: ['it_editor'] })
    const otherId = await keyIdOf(other)
    expect((await t.request('PATCH', `/api/v1/api-keys/${otherId}`, { key, body: { description: 'mine' } })).status).toBe(200)
    // That change's notification empties the cache: let it arrive, then hold the key in the cache.
    await new Promise((r) => setTimeout(r, 300))
    expect((await t.request('GET', '/api/v1/assets', { key })).status).toBe(200)
    const owner = await userId('editor2@acme.test')
    await elsewhere('UPDATE api_keys SET owner_user_id = $2 WHERE id = $1', [await keyIdOf(key), owner])
    // The editor's other key is no longer this key's owner's: not found.
    expect((await t.request('PATCH', `/api/v1/api-keys/${otherId}`, { key, body: { description: 'hijacked' } })).status).toBe(404)
    const minted = await t.request('POST', '/api/v1/api-keys', { key, body: { name: 'minted after transfer', permission_type: 'Viewer', role_keys: ['it_editor'] } })
    expect(minted.status).toBe(201)
    expect(minted.body.data.owner_user_id).toBe(owner)
    const created = await t.request('POST', '/api/v1/assets', { key, body: { ...note('after transfer'), access_domain_key: 'it' } })
    expect(created.status).toBe(201)
    const events = (await t.request('GET', `/api/v1/events?filter[subject]=assets/${created.body.data.id}`)).body.data
    expect(events.map((e: { data: { actor: unknown } }) => e.data.actor)).toEqual([{ api_key_id: await keyIdOf(key), user_id: owner }])
  })

  it('runs a key mint again with the key as it is when a transfer of that key commits while it waits (outside audit: 401)', async () => {
    await editorEnabled()
    const key = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
    const id = await keyIdOf(key)
    const owner = await userId('owner@acme.test')
    // Another process's transfer, holding the key's row while the mint starts.
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let locked!: () => void
    const isLocked = new Promise<void>((resolve) => (locked = resolve))
    const transfer = t.store.db.transaction(async (tx) => {
      await tx.query('UPDATE api_keys SET owner_user_id = $2 WHERE id = $1', [id, owner])
      locked()
      await held
    })
    await isLocked
    const mint = t.request('POST', '/api/v1/api-keys', { key, body: { name: 'minted during transfer', permission_type: 'Viewer', role_keys: ['it_editor'] } })
    await new Promise((r) => setTimeout(r, 300))
    release()
    await transfer
    const res = await mint
    expect({ status: res.status, owner: res.body.data?.owner_user_id }).toEqual({ status: 201, owner })
  })

  it('answers a repeated Idempotency-Key of a key revoked elsewhere with 401, not the replay; a refusal of a key is not kept as its answer', async () => {
    await editorEnabled()
    const key = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
    const first = await t.request('POST', '/api/v1/assets', { key, body: { ...note('idempotent once'), access_domain_key: 'it' }, headers: { 'idempotency-key': 'revoked-repeat' } })
    expect(first.status).toBe(201)
    await elsewhere('DELETE FROM api_keys WHERE id = $1', [await keyIdOf(key)])
    const repeat = await t.request('POST', '/api/v1/assets', { key, body: { ...note('idempotent once'), access_domain_key: 'it' }, headers: { 'idempotency-key': 'revoked-repeat' } })
    expect({ status: repeat.status, replayed: repeat.headers['idempotent-replayed'] }).toEqual({ status: 401, replayed: undefined })

    const disabled = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
    expect((await t.request('GET', '/api/v1/assets', { key: disabled })).status).toBe(200)
    await elsewhere("UPDATE users SET enabled = false WHERE email = 'editor@acme.test'", [])
    const body = { ...note('inactive then active'), access_domain_key: 'it' }
    const refused = await t.request('POST', '/api/v1/assets', { key: disabled, body, headers: { 'idempotency-key': 'inactive-repeat' } })
    expect(refused.body.errors?.[0]?.code).toBe('api_key_inactive')
    await t.store.db.query("UPDATE users SET enabled = true WHERE email = 'editor@acme.test'")
    t.app.authenticator.invalidate()
    const again = await t.request('POST', '/api/v1/assets', { key: disabled, body, headers: { 'idempotency-key': 'inactive-repeat' } })
    expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: undefined })
  })
})
