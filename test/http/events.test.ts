import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, readFeed, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { HOLD_RELAY_LOCK } from '../../src/events/relay.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/

for (const store of STORES) {
  describe(`${store}: events (CONTRACT §13)`, () => {
    let t: TestApp
    let keyId: string
    let ownerId: string
    beforeAll(async () => {
      t = await createTestApp(store)
      const keys = (await t.request('GET', '/api/v1/api-keys')).body.data
      keyId = keys[0].id
      ownerId = keys[0].owner_user_id
    })
    afterAll(async () => t.close())

    const feed = (cursor: string | null, query = '', key?: string) => readFeed(t, cursor, query, key)
    async function tail(): Promise<string> {
      return (await feed(null)).cursor
    }

    it('asset.created: a CloudEvent with the record, the actor, the request id and the Idempotency-Key', async () => {
      const cursor = await tail()
      const res = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'server', name: 'ev-1', access_domain_key: 'it', properties: { hostname: 'ev-1', cpu_count: 2 } },
        headers: { 'x-request-id': 'req-ev-1', 'idempotency-key': 'idem-ev-1' },
      })
      expect(res.status).toBe(201)
      const { events } = await feed(cursor)
      expect(events).toEqual([{
        specversion: '1.0', id: expect.stringMatching(UUID), type: 'asset.created', source: '/organizations/acme',
        subject: `assets/${res.body.data.id}`, time: expect.stringMatching(TIME), datacontenttype: 'application/json',
        sequence: expect.stringMatching(/^[1-9][0-9]*$/), requestid: 'req-ev-1', idempotencykey: 'idem-ev-1',
        data: { object: res.body.data, actor: { api_key_id: keyId, user_id: ownerId } },
      }])
    })

    it('asset.updated lists exactly the changed fields; a PATCH with the same values emits nothing', async () => {
      const created = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'ev-2', access_domain_key: 'it', properties: { hostname: 'ev-2', environment: 'dev', tags: ['pci'], owner: 'ann' } } })).body.data
      const cursor = await tail()
      const patched = await t.request('PATCH', `/api/v1/assets/${created.id}`, {
        body: { name: 'ev-2b', access_domain_key: 'finance', properties: { environment: 'prod', tags: ['pci', 'gdpr'], owner: null, cpu_count: 4 } },
        headers: { 'x-request-id': 'req-ev-2' },
      })
      expect(patched.status).toBe(200)
      const same = await t.request('PATCH', `/api/v1/assets/${created.id}`, { body: { name: 'ev-2b', properties: { environment: 'prod' } } })
      expect(same.status).toBe(200)
      const { events } = await feed(cursor)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ type: 'asset.updated', subject: `assets/${created.id}`, requestid: 'req-ev-2' })
      expect(events[0].idempotencykey).toBeUndefined()
      expect(events[0].data).toEqual({
        object: patched.body.data,
        changes: {
          name: { from: 'ev-2', to: 'ev-2b' },
          access_domain_key: { from: 'it', to: 'finance' },
          'properties.cpu_count': { from: null, to: 4 },
          'properties.environment': { from: 'dev', to: 'prod' },
          'properties.owner': { from: 'ann', to: null },
          'properties.tags': { from: ['pci'], to: ['pci', 'gdpr'] },
        },
        actor: { api_key_id: keyId, user_id: ownerId },
      })
    })

    it('asset.updated of a bulk PATCH: one per item, also for items on one asset (each from the asset as the item before left it); an upsert replacing it lists every key it drops', async () => {
      // Setup: a server with four properties.
      const created = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'ev-fold', access_domain_key: 'it', properties: { hostname: 'ev-fold', environment: 'dev', owner: 'ann', cpu_count: 2 } } })).body.data
      const cursor = await tail()
      // Action: three items on the same asset: owner set then cleared, environment changed then set back, cpu_count changed.
      const patched = await t.request('PATCH', '/api/v1/bulk/assets', { body: [
        { id: created.id, properties: { owner: 'bob', environment: 'prod' } },
        { id: created.id, properties: { owner: null, cpu_count: 8 } },
        { id: created.id, properties: { environment: 'dev' } },
      ] })
      expect(patched.status).toBe(200)
      // Action: an upsert replacing the asset with only its hostname and a new memory_gb.
      const replaced = await t.request('PUT', '/api/v1/assets/server:hostname:ev-fold', { body: { name: 'ev-fold', access_domain_key: 'it', properties: { memory_gb: 16 } } })
      expect(replaced.status).toBe(200)
      // Assert: one event per item (CONTRACT §13), then the upsert's, each with exactly what changed.
      const { events } = await feed(cursor)
      expect(events.map((e) => [e.type, e.data.changes])).toEqual([
        ['asset.updated', { 'properties.owner': { from: 'ann', to: 'bob' }, 'properties.environment': { from: 'dev', to: 'prod' } }],
        ['asset.updated', { 'properties.owner': { from: 'bob', to: null }, 'properties.cpu_count': { from: 2, to: 8 } }],
        ['asset.updated', { 'properties.environment': { from: 'prod', to: 'dev' } }],
        ['asset.updated', { 'properties.cpu_count': { from: 8, to: null }, 'properties.environment': { from: 'dev', to: null }, 'properties.memory_gb': { from: null, to: 16 } }],
      ])
      expect(events.slice(0, 3).map((e) => e.data.object.properties)).toEqual([
        { hostname: 'ev-fold', environment: 'prod', owner: 'bob', cpu_count: 2 },
        { hostname: 'ev-fold', environment: 'prod', cpu_count: 8 },
        { hostname: 'ev-fold', environment: 'dev', cpu_count: 8 },
      ])
      expect(patched.body.data.map((d: { id: string }) => d.id)).toEqual([created.id, created.id, created.id])
    })

    it('asset.archived carries the last state; a bulk of N emits N events in item order', async () => {
      const cursor = await tail()
      const items = Array.from({ length: 25 }, (_, i) => ({ asset_type_key: 'note', name: `bulk-${i}`, client_ref: `r${i}` }))
      const bulk = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(bulk.status).toBe(201)
      const first = bulk.body.data[0].id
      const before = (await t.request('GET', `/api/v1/assets/${first}`)).body.data
      expect((await t.request('DELETE', `/api/v1/assets/${first}`)).status).toBe(204)
      const { events } = await feed(cursor)
      expect(events.map((e) => e.type)).toEqual([...items.map(() => 'asset.created'), 'asset.archived'])
      expect(events.slice(0, 25).map((e) => e.data.object.name)).toEqual(items.map((i) => i.name))
      expect(events[25].data.object).toEqual(before)
      const sequences = events.map((e) => BigInt(e.sequence))
      expect(sequences).toEqual([...sequences].sort((a, b) => (a < b ? -1 : 1)))
      expect(new Set(sequences).size).toBe(sequences.length)
    })

    it('relationship.created and relationship.deleted, also from an embedded relationship sync', async () => {
      const server = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'rel-s', properties: { hostname: 'rel-s' } } })).body.data
      const cursor = await tail()
      const app = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'application', name: 'rel-a', properties: { code: 'rel-a' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: server.id }] } } } },
      })
      expect(app.status).toBe(201)
      const rel = (await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${app.body.data.id}`)).body.data[0]
      const sync = await t.request('PATCH', `/api/v1/assets/${app.body.data.id}`, { body: { relationships: { outgoing: { runs_on: { related_assets: [] } } } } })
      expect(sync.status).toBe(200)
      const direct = await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: server.id, target_asset_id: app.body.data.id } })
      expect((await t.request('DELETE', `/api/v1/relationships/${direct.body.data.id}`)).status).toBe(204)
      const { events } = await feed(cursor)
      expect(events.map((e) => `${e.type} ${e.subject}`)).toEqual([
        `asset.created assets/${app.body.data.id}`,
        `relationship.created relationships/${rel.id}`,
        `relationship.deleted relationships/${rel.id}`,
        `relationship.created relationships/${direct.body.data.id}`,
        `relationship.deleted relationships/${direct.body.data.id}`,
      ])
      expect(events[1].data.object).toEqual(rel)
      expect(events[2].data.object).toEqual(rel)
      expect(events[3].data.object).toEqual(direct.body.data)
    })

    it('api_key.created, api_key.updated (incl. transfer) and api_key.deleted, never with a secret', async () => {
      const users = (await t.request('GET', '/api/v1/users')).body.data
      const editor = users.find((u: any) => u.email === 'editor@acme.test')
      const cursor = await tail()
      const created = await t.request('POST', '/api/v1/api-keys', { body: { name: 'k1', permission_type: 'Editor', role_keys: ['it_editor'] } })
      expect(created.status).toBe(201)
      const id = created.body.data.id
      const { secret: _secret, ...record } = created.body.data
      expect((await t.request('PATCH', `/api/v1/api-keys/${id}`, { body: { name: 'k1' } })).status).toBe(200)
      const renamed = await t.request('PATCH', `/api/v1/api-keys/${id}`, { body: { name: 'k2', description: 'd' } })
      const moved = await t.request('PATCH', `/api/v1/api-keys/${id}`, { body: { owner_user_id: editor.id } })
      expect(moved.status).toBe(200)
      expect((await t.request('DELETE', `/api/v1/api-keys/${id}`)).status).toBe(204)
      const { events } = await feed(cursor)
      expect(events.map((e) => e.type)).toEqual(['api_key.created', 'api_key.updated', 'api_key.updated', 'api_key.deleted'])
      expect(events.every((e) => e.subject === `api-keys/${id}`)).toBe(true)
      expect(events[0].data.object).toEqual(record)
      expect(JSON.stringify(events)).not.toContain(created.body.data.secret)
      expect(events[1].data.changes).toEqual({ name: { from: 'k1', to: 'k2' }, description: { from: null, to: 'd' } })
      expect(events[1].data.object).toEqual(renamed.body.data)
      expect(events[2].data.changes).toEqual({ owner_user_id: { from: ownerId, to: editor.id } })
      expect(events[3].data.object).toEqual(moved.body.data)
    })

    it('keys made by the CLI emit api_key.created with no actor and no request id', async () => {
      const cursor = await tail()
      await t.givenKey({ type: 'Viewer' })
      const { events } = await feed(cursor)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({ type: 'api_key.created', requestid: null, data: { actor: { api_key_id: null, user_id: null } } })
    })

    it('dry runs, rejected requests, unchanged upserts and replays emit nothing', async () => {
      await t.request('PUT', '/api/v1/assets/server:hostname:same-1', { body: { name: 's', properties: {} } })
      const cursor = await tail()
      expect((await t.request('POST', '/api/v1/assets?dry_run=true', { body: { asset_type_key: 'server', name: 'dry', properties: { hostname: 'dry' } } })).status).toBe(200)
      expect((await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'note', name: 'ok' }, { asset_type_key: 'note', name: '' }] })).status).toBe(422)
      expect((await t.request('PUT', '/api/v1/assets/server:hostname:same-1', { body: { name: 's', properties: {} } })).status).toBe(200)
      const bulkPut = await t.request('PUT', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:same-1', name: 's' }] })
      expect(bulkPut.body.data[0].result).toBe('unchanged')
      expect((await feed(cursor)).events).toEqual([])
      const body = { asset_type_key: 'note', name: 'idem' }
      const headers = { 'idempotency-key': 'idem-replay' }
      expect((await t.request('POST', '/api/v1/assets', { body, headers })).status).toBe(201)
      expect((await t.request('POST', '/api/v1/assets', { body, headers })).headers['idempotent-replayed']).toBe('true')
      expect((await feed(cursor)).events.map((e) => e.type)).toEqual(['asset.created'])
    })

    it('gives a key that could not see an asset before its move the move\'s changes without their values from before', async () => {
      // it_editor sees applications in it only: in finance, this one does not exist for it (CONTRACT §9).
      const itOnly = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
      const a = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'fin-secret-name', access_domain_key: 'finance', properties: { code: 'move-1', owner: 'fin-secret-owner' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: 'it', name: 'now-in-it', properties: { owner: 'public' } } })
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'still-in-it' } })
      const full = { access_domain_key: { from: 'finance', to: 'it' }, name: { from: 'fin-secret-name', to: 'now-in-it' }, 'properties.owner': { from: 'fin-secret-owner', to: 'public' } }
      const seen = { access_domain_key: { to: 'it' }, name: { to: 'now-in-it' }, 'properties.owner': { to: 'public' } }
      const later = { name: { from: 'now-in-it', to: 'still-in-it' } }
      const changes = (events: { type: string; data: { changes?: unknown } }[]) => events.map((e) => [e.type, e.data.changes ?? null])
      expect(changes((await feed(null, `&filter[subject]=assets/${a.id}`)).events)).toEqual([['asset.created', null], ['asset.updated', full], ['asset.updated', later]])
      expect(changes((await feed(null, `&filter[subject]=assets/${a.id}`, itOnly)).events)).toEqual([['asset.updated', seen], ['asset.updated', later]])
      const history = await t.request('GET', `/api/v1/assets/${a.id}/history`, { key: itOnly })
      expect(changes(history.body.data)).toEqual([['asset.updated', later], ['asset.updated', seen]])
      expect(JSON.stringify(history.body)).not.toMatch(/fin-secret/)
      // Back into finance and out again: each move out of finance is seen without its past.
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: 'finance', name: 'fin-secret-2' } })
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: 'it' } })
      expect(changes((await feed(null, `&filter[subject]=assets/${a.id}`, itOnly)).events)).toEqual([
        ['asset.updated', seen], ['asset.updated', later], ['asset.updated', { access_domain_key: { to: 'it' } }],
      ])
      // A key that sees both domains gets every value.
      const both = await t.givenKey({ type: 'Viewer', user: 'viewer@acme.test', roles: ['all'] })
      expect(changes((await feed(null, `&filter[subject]=assets/${a.id}`, both)).events).at(-1)).toEqual(['asset.updated', { access_domain_key: { from: 'finance', to: 'it' } }])

      // Out of no access domain, which it_editor does not see either (found by test/http/write-model.test.ts).
      const n = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'nodomain-secret', properties: { hostname: 'move-2', owner: 'nodomain-owner' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${n.id}`, { body: { access_domain_key: 'it', name: 'server-in-it', properties: { owner: null } } })
      const moved = { access_domain_key: { to: 'it' }, name: { to: 'server-in-it' }, 'properties.owner': { to: null } }
      expect(changes((await feed(null, `&filter[subject]=assets/${n.id}`, itOnly)).events)).toEqual([['asset.updated', moved]])
      const its = await t.request('GET', `/api/v1/assets/${n.id}/history`, { key: itOnly })
      expect(changes(its.body.data)).toEqual([['asset.updated', moved]])
      expect(JSON.stringify(its.body)).not.toMatch(/nodomain-/)
    })

    it('refuses an event type or a subject that cannot exist with 400 invalid_filter', async () => {
      const typo = await t.request('GET', '/api/v1/events?filter[type]=asset.created,asset.craeted')
      expect(typo.status).toBe(400)
      expect(typo.body.errors).toEqual([expect.objectContaining({
        code: 'invalid_filter', source: { parameter: 'filter[type]' }, detail: expect.stringContaining('"asset.craeted" is not an event type'),
      })])
      // An empty list or entry is no filter of every type.
      for (const [list, detail] of [['', 'is empty'], ['asset.created,,asset.updated', 'has an empty entry'], ['asset.created,', 'has an empty entry'], [' ', 'is empty']] as const) {
        const res = await t.request('GET', `/api/v1/events?filter[type]=${encodeURIComponent(list)}`)
        expect({ list, status: res.status, body: res.body }).toEqual({ list, status: 400, body: { errors: [{
          status: '400', code: 'invalid_filter', source: { parameter: 'filter[type]' },
          detail: `filter[type] ${detail}: give one or more event types, comma-separated, e.g. asset.created,asset.updated (leave filter[type] out for every type)`,
        }] } })
      }
      for (const subject of ['assets/web-01', 'asset/0190b3b0-0000-7000-8000-000000000001', 'assets/0190b3b0-0000-7000-8000-000000000001/x', 'assets']) {
        const res = await t.request('GET', `/api/v1/events?filter[subject]=${subject}`)
        expect(res.status, subject).toBe(400)
        expect(res.body.errors[0]).toMatchObject({ code: 'invalid_filter', source: { parameter: 'filter[subject]' } })
      }
    })

    it('takes an asset\'s composite key in filter[subject]: the live asset it names; one naming none filters for nothing', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'subject-1', access_domain_key: 'finance', properties: { code: 'subject-1' } } })).body.data
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'subject-1b' } })
      const byId = await feed(null, `&filter[subject]=assets/${a.id}`)
      expect(byId.events.map((e) => e.type)).toEqual(['asset.created', 'asset.updated'])
      expect((await feed(null, '&filter[subject]=assets/application:code:subject-1')).events).toEqual(byId.events)
      for (const none of ['assets/application:code:nobody', 'assets/server:hostname:subject-1']) {
        const res = await t.request('GET', `/api/v1/events?filter[subject]=${none}`)
        expect(res.status, none).toBe(200)
        expect(res.body.data, none).toEqual([])
        expect(res.body.meta.has_more).toBe(false)
      }
      // A key that cannot see the asset (it_editor: applications in it only) learns nothing of it: the same empty feed, no 404.
      const itOnly = await t.givenKey({ type: 'Editor', user: 'editor@acme.test', roles: ['it_editor'] })
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: 'it' } })
      const moved = await t.request('GET', '/api/v1/events?filter[subject]=assets/application:code:subject-1', { key: itOnly })
      expect(moved.body.data.map((e: { type: string }) => e.type)).toEqual(['asset.updated'])
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { access_domain_key: null } })
      const hidden = await t.request('GET', '/api/v1/events?filter[subject]=assets/application:code:subject-1', { key: itOnly })
      expect(hidden.status).toBe(200)
      expect(hidden.body.data).toEqual([])
      // No composite key: the type is unknown, or has no unique key.
      for (const [subject, detail] of [
        ['assets/printer:serial:x', 'printer:serial:x is no composite key: there is no asset type printer'],
        ['assets/note:body:x', 'note:body:x is no composite key: note has no unique key'],
        ['assets/server:environment:dev', 'server:environment:dev is no composite key: server has the unique key hostname, not environment'],
      ] as const) {
        const res = await t.request('GET', `/api/v1/events?filter[subject]=${subject}`)
        expect({ subject, status: res.status, body: res.body }).toEqual({ subject, status: 400, body: { errors: [{
          status: '400', code: 'invalid_filter', source: { parameter: 'filter[subject]' }, detail: `filter[subject]: ${detail}`,
        }] } })
      }
    })

    it('filters by type and subject; pages follow next_cursor; an empty page keeps the cursor', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'f-1' } })).body.data
      await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'f-2' } })
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'f-3' } })
      const bySubject = await feed(null, `&filter[subject]=assets/${a.id}`)
      expect(bySubject.events.map((e) => e.type)).toEqual(['asset.created', 'asset.updated'])
      expect((await feed(null, `&filter[subject]=assets/${a.id.toUpperCase()}`)).events).toEqual(bySubject.events)
      const byType = await feed(null, '&filter[type]=asset.updated,api_key.deleted')
      expect(new Set(byType.events.map((e) => e.type))).toEqual(new Set(['asset.updated', 'api_key.deleted']))
      const all = (await feed(null)).events
      const pages: any[] = []
      let cursor: string | null = null
      for (let i = 0; i < 100; i++) {
        const res: any = await t.request('GET', `/api/v1/events?page[size]=7${cursor ? `&after=${cursor}` : ''}`)
        pages.push(...res.body.data)
        cursor = res.body.meta.next_cursor
        if (!res.body.meta.has_more) break
      }
      expect(pages.map((e) => e.id)).toEqual(all.map((e) => e.id))
      const empty = await t.request('GET', `/api/v1/events?after=${cursor}`)
      expect(empty.body).toEqual({ data: [], meta: { next_cursor: cursor, has_more: false } })
    })

    it('scopes the feed: a restricted key sees only its domains, a relationship needs both ends, a Viewer no api_key.*', async () => {
      const cursor = await tail()
      const it1 = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'sc-it', access_domain_key: 'it' } })).body.data
      const fin = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'sc-fin', access_domain_key: 'finance' } })).body.data
      const finServer = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'sc-fs', access_domain_key: 'finance', properties: { hostname: 'sc-fs' } } })).body.data
      await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: it1.id, target_asset_id: fin.id } })
      const visibleRel = (await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: it1.id, target_asset_id: finServer.id } })).body.data
      await t.request('POST', '/api/v1/api-keys', { body: { name: 'sc', permission_type: 'Viewer', role_keys: ['all'] } })
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const viewer = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer', roles: ['all'] })
      const seen = (await feed(cursor, '', editor)).events.map((e) => e.subject)
      expect(seen).toEqual([`assets/${it1.id}`, `assets/${finServer.id}`, `relationships/${visibleRel.id}`])
      const viewerTypes = (await feed(cursor, '', viewer)).events.map((e) => e.type)
      expect(viewerTypes).toEqual(['asset.created', 'asset.created', 'asset.created', 'relationship.created', 'relationship.created'])
      const adminTypes = (await feed(cursor)).events.map((e) => e.type)
      expect(adminTypes.filter((ty) => ty.startsWith('api_key.'))).toEqual(['api_key.created', 'api_key.created', 'api_key.created'])
    })

    it('describes the feed, the history and one schema per event type in the OpenAPI document', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/events', '/api/v1/assets/{id}/history']))
      expect(Object.keys(doc.paths['/api/v1/events'].get.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '410', '429']))
      for (const name of ['AssetCreatedEvent', 'AssetUpdatedEvent', 'AssetArchivedEvent', 'AssetRestoredEvent', 'AssetDeletedEvent',
        'RelationshipCreatedEvent', 'RelationshipDeletedEvent', 'ApiKeyCreatedEvent', 'ApiKeyUpdatedEvent', 'ApiKeyDeletedEvent']) {
        expect(doc.components.schemas[name]).toMatchObject({ type: 'object', properties: { specversion: { enum: ['1.0'] } } })
      }
      expect(doc.components.schemas.AssetUpdatedEvent.properties.type).toEqual({ type: 'string', enum: ['asset.updated'] })
      expect(doc.components.schemas.AssetUpdatedEvent.properties.data.required).toEqual(['object', 'changes', 'actor'])
    })

    it('refuses a malformed cursor (400) and a page size over 1000 (400 invalid_page)', async () => {
      const bad = await t.request('GET', '/api/v1/events?after=not-a-cursor!')
      expect(bad.status).toBe(400)
      expect(bad.body.errors[0]).toMatchObject({ code: 'invalid_request', source: { parameter: 'after' } })
      const forged = await t.request('GET', `/api/v1/events?after=${Buffer.from('x12').toString('base64url')}`)
      expect(forged.body.errors[0].code).toBe('invalid_request')
      // Well formed, but past the organization's newest event: it would skip every event up to it.
      const ahead = await t.request('GET', `/api/v1/events?after=${Buffer.from('s99999999').toString('base64url')}`)
      expect(ahead).toMatchObject({ status: 400, body: { errors: [{ code: 'invalid_request', source: { parameter: 'after' },
        detail: 'after is past the newest event of this organization: it must be a next_cursor this API returned' }] } })
      const head = (await t.request('GET', `/api/v1/events?after=${await tail()}`)).body.meta.next_cursor
      expect((await t.request('GET', `/api/v1/events?after=${head}`)).status).toBe(200)
      expect((await t.request('GET', '/api/v1/events?page[size]=1001')).body.errors[0].code).toBe('invalid_page')
    })

    it('answers 410 cursor_expired for a cursor older than the retention', async () => {
      const old = await tail()
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'old-1' } })
      await t.app.events.flush()
      await t.store.db.query(`UPDATE events SET time = now() - interval '400 days'`)
      expect(await t.app.events.purgeNow()).toBeGreaterThan(0)
      const res = await t.request('GET', `/api/v1/events?after=${old}`)
      expect(res.status).toBe(410)
      expect(res.body.errors[0]).toMatchObject({ status: '410', code: 'cursor_expired' })
      const fresh = await t.request('GET', '/api/v1/events')
      expect(fresh.status).toBe(200)
      expect(fresh.body.data).toEqual([])
      expect((await t.request('GET', `/api/v1/events?after=${fresh.body.meta.next_cursor}`)).status).toBe(200)
      // The organization's positions continue above the highest purged: none is given twice, and
      // the cursor at the head reads the next event.
      const purgedThrough = Number((await t.store.db.query<{ p: string }>('SELECT purged_through AS p FROM event_retention WHERE org_id = $1', [t.orgId])).rows[0]!.p)
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'after-purge' } })
      expect(created.status).toBe(201)
      const next = (await feed(fresh.body.meta.next_cursor)).events
      expect(next.map((e) => [e.subject, Number(e.sequence)])).toEqual([[`assets/${created.body.data.id}`, purgedThrough + 1]])
    })

    it('keeps what NATS has not acknowledged, and every later event, however old: published once NATS is back', async () => {
      const names = ['nats-1', 'nats-2', 'nats-3', 'nats-4']
      for (const name of names) await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })
      await t.app.events.flush()
      const ours = async () => (await t.store.db.query<{ name: string; sequence: string }>(
        `SELECT data->'object'->>'name' AS name, sequence FROM events WHERE org_id = $1 AND data->'object'->>'name' LIKE 'nats-%' ORDER BY sequence`, [t.orgId])).rows
      const [, second] = await ours()
      // An outage longer than the retention: nats-2 and nats-4 were never acknowledged.
      await t.store.db.query(`UPDATE events SET pending_publish = data->'object'->>'name' IN ('nats-2', 'nats-4') WHERE org_id = $1`, [t.orgId])
      await t.store.db.query(`UPDATE events SET time = now() - interval '400 days'`)
      await t.app.events.purgeNow()
      expect((await ours()).map((e) => e.name)).toEqual(['nats-2', 'nats-3', 'nats-4'])
      const purgedThrough = async () => Number((await t.store.db.query<{ p: string }>('SELECT purged_through AS p FROM event_retention WHERE org_id = $1', [t.orgId])).rows[0]!.p)
      expect(await purgedThrough()).toBe(Number(second!.sequence) - 1)
      // Published at last: the next round purges them.
      await t.store.db.query('UPDATE events SET pending_publish = false WHERE org_id = $1', [t.orgId])
      await t.app.events.purgeNow()
      expect(await ours()).toEqual([])
    })

    if (store === 'postgres') {
      it('purges when asked even while another process holds the relay lock a moment (it waits, as a flush does)', async () => {
        await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'held-1' } })
        await t.app.events.flush()
        await t.store.db.query(`UPDATE events SET time = now() - interval '400 days'`)
        let purged!: Promise<number>
        await t.store.db.transaction(async (tx) => {
          await tx.query(HOLD_RELAY_LOCK)
          purged = t.app.events.purgeNow()
          await new Promise((r) => setTimeout(r, 200))
        })
        expect(await purged).toBeGreaterThan(0)
      })
    }

    it('moves a filtered consumer\'s cursor past what it does not match: nothing skipped, and no 410 once that is purged', async () => {
      const position = (cursor: string) => Number(Buffer.from(cursor, 'base64url').toString().slice(1))
      const start = await tail()
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'cur-1' } })
      await t.app.events.flush()
      const first = await t.request('GET', `/api/v1/events?after=${start}&filter[type]=asset.archived`)
      expect(first.body.data).toEqual([])
      expect(position(first.body.meta.next_cursor)).toBeGreaterThan(position(start))
      const archived = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'cur-2' } })).body.data
      await t.request('DELETE', `/api/v1/assets/${archived.id}`)
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'cur-3' } })
      await t.app.events.flush()
      const second = await t.request('GET', `/api/v1/events?after=${first.body.meta.next_cursor}&filter[type]=asset.archived`)
      expect(second.body.data.map((e: any) => `${e.type} ${e.subject}`)).toEqual([`asset.archived assets/${archived.id}`])
      expect(second.body.meta.has_more).toBe(false)
      // Retention purges every event so far, the one the consumer did not match (cur-3) included.
      await t.store.db.query(`UPDATE events SET time = now() - interval '400 days'`)
      expect(await t.app.events.purgeNow()).toBeGreaterThan(0)
      const third = await t.request('GET', `/api/v1/events?after=${second.body.meta.next_cursor}&filter[type]=asset.archived`)
      expect(third.status).toBe(200)
      expect(third.body).toEqual({ data: [], meta: { next_cursor: second.body.meta.next_cursor, has_more: false } })
    })

    it('kbis apply removing a role emits api_key.updated for each key that held it (last: it changes the fixture)', async () => {
      // A key keeps at least one role: removing a key's last role is refused (setup/apply-access.ts).
      const key = await t.givenKey({ user: 'owner@acme.test', type: 'Editor', roles: ['it_editor', 'all'] })
      const id = (await t.request('GET', '/api/v1/api-keys?page[size]=100')).body.data.find((k: { secret_prefix: string }) => key.startsWith(k.secret_prefix)).id
      // Keys earlier tests made with it_editor alone would make the removal refused: revoked first.
      await t.store.db.query("DELETE FROM api_keys WHERE role_keys = '{it_editor}'")
      const cursor = await tail()
      const setup = {
        ...ACME,
        roles: ACME.roles.filter((r) => r.key !== 'it_editor'),
        users: ACME.users.map((u) => ({ ...u, role_keys: u.role_keys.filter((r) => r !== 'it_editor') })),
      }
      await applySetup(t.store.db, setup as unknown as SetupFile)
      const updates = (await feed(cursor)).events.filter((e) => e.subject === `api-keys/${id}`)
      expect(updates).toHaveLength(1)
      expect(updates[0]).toMatchObject({ type: 'api_key.updated', requestid: null, data: { changes: { role_keys: { from: ['it_editor', 'all'], to: ['all'] } }, actor: { api_key_id: null, user_id: null } } })
    })
  })
}
