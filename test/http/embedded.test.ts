import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

type Rel = { id: string; relationship_type_key: string; source_asset_id: string; target_asset_id: string }

for (const store of STORES) {
  describe(`${store}: embedded relationship sync`, () => {
    let t: TestApp
    let editorKey: string
    let n = 0
    beforeAll(async () => {
      t = await createTestApp(store)
      editorKey = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
    })
    afterAll(async () => t.close())

    const createAsset = async (body: Record<string, unknown>, key?: string) => {
      const res = await t.request('POST', '/api/v1/assets', { body, ...(key ? { key } : {}) })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      return res.body.data as { id: string; name: string; properties: Record<string, unknown> }
    }
    const server = (domain = 'it') => {
      const hostname = `srv-${++n}`
      return createAsset({ asset_type_key: 'server', name: hostname, access_domain_key: domain, properties: { hostname } })
    }
    const application = (extra: Record<string, unknown> = {}, domain = 'it') => {
      const code = `app-${++n}`
      return createAsset({ asset_type_key: 'application', name: code, access_domain_key: domain, properties: { code }, ...extra })
    }
    const patch = (id: string, body: Record<string, unknown>, key?: string) => t.request('PATCH', `/api/v1/assets/${id}`, { body, ...(key ? { key } : {}) })
    /** Every relationship row touching `id`, straight from the store, as "type source>target". */
    const stored = async (id: string) => {
      const rows = await t.store.db.query<Rel>('SELECT * FROM relationships WHERE source_asset_id = $1 OR target_asset_id = $1', [id])
      return rows.rows
    }
    const pairs = (rows: Rel[]) => rows.map((r) => `${r.relationship_type_key} ${r.source_asset_id}>${r.target_asset_id}`).sort()
    const runsOn = (...refs: string[]) => ({ outgoing: { runs_on: { related_assets: refs.map((id) => ({ id })) } } })

    it('creates the submitted relationships with the asset (UUIDs and composite keys)', async () => {
      const a = await server()
      const b = await server()
      const app = await application({ relationships: runsOn(a.id, `server:hostname:${b.name}`) })
      expect(pairs(await stored(app.id))).toEqual([`runs_on ${app.id}>${a.id}`, `runs_on ${app.id}>${b.id}`].sort())
      const read = await t.request('GET', `/api/v1/assets/${app.id}?include=relationships`)
      expect(read.body.data.relationships_meta.page.total_items).toBe(2)
    })

    it('replaces a pair by exactly the submitted set, keeping the id of relationships that stay', async () => {
      const [a, b, c] = [await server(), await server(), await server()]
      const app = await application({ relationships: runsOn(a.id, b.id) })
      const kept = (await stored(app.id)).find((r) => r.target_asset_id === b.id)!
      const res = await patch(app.id, { relationships: runsOn(b.id, c.id) })
      expect(res.status).toBe(200)
      const after = await stored(app.id)
      expect(pairs(after)).toEqual([`runs_on ${app.id}>${b.id}`, `runs_on ${app.id}>${c.id}`].sort())
      expect(after.find((r) => r.target_asset_id === b.id)!.id).toBe(kept.id)
    })

    it('[] removes every relationship of the pair; pairs not sent are untouched', async () => {
      const [a, b] = [await server(), await server()]
      const other = await application()
      const app = await application({
        relationships: { outgoing: { runs_on: { related_assets: [{ id: a.id }, { id: b.id }] }, depends_on: { related_assets: [{ id: other.id }] } } },
      })
      const incoming = await application({ relationships: { outgoing: { depends_on: { related_assets: [{ id: app.id }] } } } })
      const res = await patch(app.id, { relationships: { outgoing: { runs_on: { related_assets: [] } } } })
      expect(res.status).toBe(200)
      expect(pairs(await stored(app.id))).toEqual([`depends_on ${app.id}>${other.id}`, `depends_on ${incoming.id}>${app.id}`].sort())
      // A PATCH without relationships leaves them all alone.
      expect((await patch(app.id, { name: 'renamed' })).status).toBe(200)
      expect(await stored(app.id)).toHaveLength(2)
    })

    it('syncs incoming pairs: the asset is the target', async () => {
      const srv = await server()
      const [x, y] = [await application(), await application()]
      const res = await patch(srv.id, { relationships: { incoming: { runs_on: { related_assets: [{ id: x.id }, { id: `application:code:${y.name}` }] } } } })
      expect(res.status).toBe(200)
      expect(pairs(await stored(srv.id))).toEqual([`runs_on ${x.id}>${srv.id}`, `runs_on ${y.id}>${srv.id}`].sort())
      await patch(srv.id, { relationships: { incoming: { runs_on: { related_assets: [{ id: y.id }] } } } })
      expect(pairs(await stored(srv.id))).toEqual([`runs_on ${y.id}>${srv.id}`])
    })

    it('an invalid related asset fails with 422 and pointers, and nothing changes (PATCH rolled back)', async () => {
      const [a, archived] = [await server(), await server()]
      const note = await createAsset({ asset_type_key: 'note', name: `note-${++n}`, properties: {} })
      expect((await t.request('DELETE', `/api/v1/assets/${archived.id}`)).status).toBe(204)
      const app = await application({ relationships: runsOn(a.id) })
      const before = await stored(app.id)
      const res = await patch(app.id, {
        name: 'must-not-change',
        relationships: {
          outgoing: {
            runs_on: { related_assets: [{ id: 'server:hostname:nope' }, { id: archived.id }, { id: note.id }, { id: a.id }] },
            owns: { related_assets: [] },
          },
        },
      })
      expect(res.status).toBe(422)
      expect(res.body).toEqual({
        errors: [
          { status: '422', code: 'validation_failed', detail: 'related asset server:hostname:nope not found', source: { pointer: '/relationships/outgoing/runs_on/related_assets/0/id' } },
          { status: '422', code: 'validation_failed', detail: `related asset ${archived.id} not found`, source: { pointer: '/relationships/outgoing/runs_on/related_assets/1/id' } },
          {
            status: '422', code: 'validation_failed', source: { pointer: '/relationships/outgoing/runs_on/related_assets/2/id' },
            detail: 'relationship type runs_on does not allow target assets of type note; it allows server',
          },
          { status: '422', code: 'validation_failed', detail: 'unknown relationship type owns', source: { pointer: '/relationships/outgoing/owns' } },
        ],
      })
      expect(await stored(app.id)).toEqual(before)
      expect((await t.request('GET', `/api/v1/assets/${app.id}`)).body.data.name).toBe(app.name)
    })

    it('an invalid related asset on create leaves no asset behind', async () => {
      const code = `app-${++n}`
      const res = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'application', name: code, properties: { code }, relationships: runsOn('server:hostname:missing') },
      })
      expect(res.status).toBe(422)
      expect(res.body.errors[0].source).toEqual({ pointer: '/relationships/outgoing/runs_on/related_assets/0/id' })
      expect((await t.request('GET', `/api/v1/assets/application:code:${code}`)).status).toBe(404)
    })

    it('lists the relationship failures of the items that passed beside the other failures (POST, PUT and PATCH bulk), writing nothing', async () => {
      const other = await application()
      const target = await server()
      const apps = [await application(), await application()]
      const code = () => `bf-${++n}`
      const missing = 'related asset server:hostname:bf-missing not found'
      const wrongType = 'relationship type runs_on does not allow target assets of type application; it allows server'
      const rel = (i: number) => `/${i}/relationships/outgoing/runs_on/related_assets/0/id`
      const before = await t.store.db.query('SELECT count(*)::int AS n FROM relationships')
      const cases: [string, unknown[]][] = [
        ['POST', [
          { asset_type_key: 'server', name: 'bf', properties: { hostname: 'bf-new', environment: 'moon' } },
          { asset_type_key: 'application', name: 'a', properties: { code: code() }, relationships: runsOn('server:hostname:bf-missing') },
          { asset_type_key: 'application', name: 'b', properties: { code: code() }, relationships: runsOn(other.id) },
          // Names the server item 0 would have created: missing only because item 0 failed.
          { asset_type_key: 'application', name: 'c', properties: { code: code() }, relationships: runsOn('server:hostname:bf-new') },
          { asset_type_key: 'application', name: 'd', properties: { code: code() }, relationships: runsOn(target.id) },
        ]],
        ['PUT', [
          { id: 'server:hostname:bf-new', name: 'bf', properties: { environment: 'moon' } },
          { id: `application:code:${code()}`, name: 'a', relationships: runsOn('server:hostname:bf-missing') },
          { id: `application:code:${code()}`, name: 'b', relationships: runsOn(other.id) },
          { id: `application:code:${code()}`, name: 'c', relationships: runsOn('server:hostname:bf-new') },
          { id: `application:code:${code()}`, name: 'd', relationships: runsOn(target.id) },
        ]],
        ['PATCH', [
          { id: target.id, properties: { hostname: 'bf-renamed', environment: 'moon' } },
          { id: apps[0]!.id, relationships: runsOn('server:hostname:bf-missing') },
          { id: apps[1]!.id, relationships: runsOn(other.id) },
          { id: other.id, name: 'renamed-too', relationships: {} },
          { id: apps[0]!.id, relationships: runsOn('server:hostname:bf-renamed') },
        ]],
      ]
      for (const [method, body] of cases) {
        const res = await t.request(method, '/api/v1/bulk/assets', { body })
        expect(res.status, method).toBe(422)
        expect(res.body.errors.map((e: any) => [e.meta.index, e.source.pointer, e.detail]), method).toEqual([
          [0, '/0/properties/environment', 'environment must be one of dev, staging, prod'],
          [1, rel(1), missing],
          [2, rel(2), wrongType],
        ])
      }
      expect((await t.store.db.query('SELECT count(*)::int AS n FROM relationships')).rows).toEqual(before.rows)
      expect((await t.request('GET', '/api/v1/assets/server:hostname:bf-new')).status).toBe(404)
    })

    it('refuses a pair whose relationship type does not allow the asset itself (422 on the pair)', async () => {
      const srv = await server()
      const other = await server()
      const res = await patch(srv.id, { relationships: runsOn(other.id) })
      expect(res.status).toBe(422)
      expect(res.body.errors).toEqual([{
        status: '422', code: 'validation_failed', source: { pointer: '/relationships/outgoing/runs_on' },
        detail: 'relationship type runs_on does not allow source assets of type server; it allows application',
      }])
    })

    it('never deletes relationships whose other end the key cannot see', async () => {
      const hidden = await application({}, 'finance')
      const visible = await application()
      const target = await server()
      // Admin links both applications to the server (depends_on accepts any types).
      await patch(target.id, { relationships: { incoming: { depends_on: { related_assets: [{ id: hidden.id }, { id: visible.id }] } } } })
      expect(await stored(target.id)).toHaveLength(2)
      const res = await patch(target.id, { relationships: { incoming: { depends_on: { related_assets: [] } } } }, editorKey)
      expect(res.status).toBe(200)
      expect(pairs(await stored(target.id))).toEqual([`depends_on ${hidden.id}>${target.id}`])
      // And the hidden one cannot be named either.
      const named = await patch(target.id, { relationships: { incoming: { depends_on: { related_assets: [{ id: hidden.id }] } } } }, editorKey)
      expect(named.status).toBe(422)
    })

    it('incoming pairs need edit on the related asset (the source): 403 to add or remove, nothing changed', async () => {
      const financeServer = await server('finance')
      const note = await createAsset({ asset_type_key: 'note', name: `note-${++n}`, access_domain_key: 'it', properties: {} })
      const add = await patch(note.id, { relationships: { incoming: { depends_on: { related_assets: [{ id: financeServer.id }] } } } }, editorKey)
      expect(add.status).toBe(403)
      expect(add.body.errors[0]).toMatchObject({ code: 'forbidden', source: { pointer: '/relationships/incoming/depends_on/related_assets/0/id' } })
      expect(await stored(note.id)).toEqual([])
      // Created by an admin, it cannot be removed by the editor either.
      expect((await patch(note.id, { relationships: { incoming: { depends_on: { related_assets: [{ id: financeServer.id }] } } } })).status).toBe(200)
      const remove = await patch(note.id, { name: 'renamed', relationships: { incoming: { depends_on: { related_assets: [] } } } }, editorKey)
      expect(remove.status).toBe(403)
      expect(remove.body.errors[0]).toMatchObject({ code: 'forbidden', source: { pointer: '/relationships/incoming/depends_on' } })
      expect(await stored(note.id)).toHaveLength(1)
      expect((await t.request('GET', `/api/v1/assets/${note.id}`)).body.data.name).toBe(note.name)
      // Keeping it as it is needs no edit on it.
      const keep = await patch(note.id, { relationships: { incoming: { depends_on: { related_assets: [{ id: financeServer.id }] } } } }, editorKey)
      expect(keep.status).toBe(200)
    })

    it('syncs with a constant number of statements whatever the number of related assets', async () => {
      const few = [await server()]
      const many = [] as { id: string }[]
      for (let i = 0; i < 12; i++) many.push(await server())
      const count = async (refs: { id: string }[]) => {
        const app = await application()
        let statements = 0
        t.store.db.onQuery = (sql) => {
          // Bookkeeping varies with timing: batched last_used_at, rate-limit counters reserved in
          // batches, the API key read again once its cached copy is 30 s old.
          if (!sql.includes('last_used_at') && !sql.includes('rate_limit_counters') && !sql.includes('secret_hash')) statements++
        }
        try {
          expect((await patch(app.id, { relationships: runsOn(...refs.map((r) => r.id)) })).status).toBe(200)
        } finally {
          t.store.db.onQuery = null
        }
        expect(await stored(app.id)).toHaveLength(refs.length)
        return statements
      }
      expect(await count(many)).toBe(await count(few))
    })
  })
}
