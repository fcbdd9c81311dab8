import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { expectOneRecordPages } from '../helpers/pages.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const MISSING = '0190b3b0-0000-7000-8000-000000000000'

type Asset = { id: string; asset_type_key: string; name: string; created_at: string; updated_at: string; properties: Record<string, unknown> }

for (const store of STORES) {
  describe(`${store}: relationships`, () => {
    let t: TestApp
    let editorKey: string
    let viewerKey: string
    beforeAll(async () => {
      t = await createTestApp(store)
      editorKey = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      viewerKey = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer', roles: ['all'] })
    })
    afterAll(async () => t.close())

    const createAsset = async (body: Record<string, unknown>): Promise<Asset> => {
      const res = await t.request('POST', '/api/v1/assets', { body })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      return res.body.data
    }
    const server = (hostname: string, domain: string | null = 'it') =>
      createAsset({ asset_type_key: 'server', name: hostname, access_domain_key: domain, properties: { hostname } })
    const application = (code: string, domain: string | null = 'it') =>
      createAsset({ asset_type_key: 'application', name: code, access_domain_key: domain, properties: { code, tier: 'gold' } })
    const relate = (body: Record<string, unknown>, key?: string) => t.request('POST', '/api/v1/relationships', { body, ...(key ? { key } : {}) })

    it('creates a relationship by UUIDs and answers 201 with the whole record', async () => {
      const app = await application('crm-1')
      const srv = await server('web-1')
      const res = await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })
      expect(res.status).toBe(201)
      expect(res.body).toEqual({
        data: {
          id: expect.stringMatching(UUID),
          relationship_type_key: 'runs_on',
          source_asset_id: app.id,
          target_asset_id: srv.id,
          created_at: expect.stringMatching(TIMESTAMP),
          updated_at: expect.stringMatching(TIMESTAMP),
        },
      })
      expect((await t.request('GET', `/api/v1/relationships/${res.body.data.id}`)).body).toEqual(res.body)
    })

    it('accepts composite keys for both ends', async () => {
      const app = await application('crm-2')
      const srv = await server('web-2')
      const res = await relate({ relationship_type_key: 'runs_on', source_asset_id: 'application:code:crm-2', target_asset_id: 'server:hostname:web-2' })
      expect(res.status).toBe(201)
      expect(res.body.data).toMatchObject({ source_asset_id: app.id, target_asset_id: srv.id })
    })

    it('expands the ends with include=source_asset,target_asset.properties', async () => {
      const app = await application('crm-3')
      const srv = await server('web-3')
      const rel = (await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })).body.data
      const res = await t.request('GET', `/api/v1/relationships/${rel.id}?include=source_asset,target_asset.properties`)
      expect(res.status).toBe(200)
      expect(res.body).toEqual({
        data: {
          ...rel,
          source_asset: { id: app.id, asset_type_key: 'application', name: 'crm-3', created_at: app.created_at, updated_at: app.updated_at },
          target_asset: { id: srv.id, asset_type_key: 'server', name: 'web-3', created_at: srv.created_at, updated_at: srv.updated_at, properties: { hostname: 'web-3' } },
        },
      })
    })

    it('rejects an unknown include with 400 invalid_include', async () => {
      const res = await t.request('GET', `/api/v1/relationships?include=owner`)
      expect(res.status).toBe(400)
      expect(res.body).toEqual({
        errors: [{
          status: '400', code: 'invalid_include', source: { parameter: 'include' },
          detail: 'unknown include "owner"; relationships include source_asset, target_asset, each optionally with .properties',
        }],
      })
    })

    it('answers 422 with a pointer for an unknown type, an unknown end and ends of types the type does not allow', async () => {
      const app = await application('crm-4')
      const srv = await server('web-4')
      const unknownType = await relate({ relationship_type_key: 'owns', source_asset_id: app.id, target_asset_id: srv.id })
      expect(unknownType.status).toBe(422)
      expect(unknownType.body).toEqual({
        errors: [{ status: '422', code: 'validation_failed', detail: 'unknown relationship type owns', source: { pointer: '/relationship_type_key' } }],
      })
      const unknownEnd = await relate({ relationship_type_key: 'runs_on', source_asset_id: 'application:code:nope', target_asset_id: MISSING })
      expect(unknownEnd.status).toBe(422)
      expect(unknownEnd.body.errors).toEqual([
        { status: '422', code: 'validation_failed', detail: 'source asset application:code:nope not found', source: { pointer: '/source_asset_id' } },
        { status: '422', code: 'validation_failed', detail: `target asset ${MISSING} not found`, source: { pointer: '/target_asset_id' } },
      ])
      const reversed = await relate({ relationship_type_key: 'runs_on', source_asset_id: srv.id, target_asset_id: app.id })
      expect(reversed.status).toBe(422)
      expect(reversed.body.errors).toEqual([
        { status: '422', code: 'validation_failed', detail: 'relationship type runs_on does not allow source assets of type server; it allows application', source: { pointer: '/source_asset_id' } },
        { status: '422', code: 'validation_failed', detail: 'relationship type runs_on does not allow target assets of type application; it allows server', source: { pointer: '/target_asset_id' } },
      ])
    })

    it('answers 422 for an archived end', async () => {
      const app = await application('crm-5')
      const srv = await server('web-5')
      expect((await t.request('DELETE', `/api/v1/assets/${srv.id}`)).status).toBe(204)
      const res = await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })
      expect(res.status).toBe(422)
      expect(res.body.errors[0].source).toEqual({ pointer: '/target_asset_id' })
    })

    it('refuses the same (type, source, target) twice with 409 duplicate_relationship', async () => {
      const app = await application('crm-6')
      const srv = await server('web-6')
      const body = { relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id }
      expect((await relate(body)).status).toBe(201)
      const again = await relate({ ...body, target_asset_id: 'server:hostname:web-6' })
      expect(again.status).toBe(409)
      expect(again.body.errors[0]).toMatchObject({ status: '409', code: 'duplicate_relationship' })
      // Another type between the same assets is a different relationship.
      expect((await relate({ ...body, relationship_type_key: 'depends_on' })).status).toBe(201)
    })

    it('deletes permanently: 204, then 404 on GET and DELETE', async () => {
      const app = await application('crm-7')
      const srv = await server('web-7')
      const rel = (await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })).body.data
      const del = await t.request('DELETE', `/api/v1/relationships/${rel.id}`)
      expect(del.status).toBe(204)
      expect(del.body).toBeNull()
      expect((await t.request('GET', `/api/v1/relationships/${rel.id}`)).status).toBe(404)
      expect((await t.request('DELETE', `/api/v1/relationships/${rel.id}`)).status).toBe(404)
      const rows = await t.store.db.query('SELECT 1 FROM relationships WHERE id = $1', [rel.id])
      expect(rows.rows).toEqual([])
      // The same relationship may be created again.
      expect((await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })).status).toBe(201)
    })

    it('answers 404 for unknown ids and ids that are not UUIDs', async () => {
      for (const id of [MISSING, 'nope', 'server:hostname:web-1']) {
        const res = await t.request('GET', `/api/v1/relationships/${encodeURIComponent(id)}`)
        expect(res.status, id).toBe(404)
        expect(res.body.errors[0]).toMatchObject({ status: '404', code: 'not_found' })
      }
    })

    it('hides relationships of archived assets from every read', async () => {
      const app = await application('crm-8')
      const srv = await server('web-8')
      const rel = (await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id })).body.data
      expect((await t.request('DELETE', `/api/v1/assets/${srv.id}`)).status).toBe(204)
      expect((await t.request('GET', `/api/v1/relationships/${rel.id}`)).status).toBe(404)
      expect((await t.request('DELETE', `/api/v1/relationships/${rel.id}`)).status).toBe(404)
      expect((await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${app.id}`)).body.data).toEqual([])
      const included = await t.request('GET', `/api/v1/assets/${app.id}?include=relationships`)
      expect(included.body.data.relationships).toEqual([])
      // Kept for the console: the row is still there.
      expect((await t.store.db.query('SELECT 1 FROM relationships WHERE id = $1', [rel.id])).rows).toHaveLength(1)
    })

    describe('permissions', () => {
      it('refuses writes with a Viewer key (403)', async () => {
        const app = await application('perm-1')
        const srv = await server('perm-web-1')
        const res = await relate({ relationship_type_key: 'runs_on', source_asset_id: app.id, target_asset_id: srv.id }, viewerKey)
        expect(res.status).toBe(403)
        expect(res.body.errors[0]).toMatchObject({ status: '403', code: 'forbidden' })
      })

      it('needs edit on the source: 403 when the source is visible but not editable', async () => {
        const financeServer = await server('perm-fin-1', 'finance')
        const itServer = await server('perm-it-1', 'it')
        const res = await relate({ relationship_type_key: 'depends_on', source_asset_id: financeServer.id, target_asset_id: itServer.id }, editorKey)
        expect(res.status).toBe(403)
        expect(res.body).toEqual({
          errors: [{
            status: '403', code: 'forbidden', source: { pointer: '/source_asset_id' },
            detail: "the key's roles do not allow to change relationships of server assets in access domain finance (edit on the source asset is needed)",
          }],
        })
        // Viewing the target is enough.
        const ok = await relate({ relationship_type_key: 'depends_on', source_asset_id: itServer.id, target_asset_id: financeServer.id }, editorKey)
        expect(ok.status).toBe(201)
        const del = await t.request('DELETE', `/api/v1/relationships/${ok.body.data.id}`, { key: editorKey })
        expect(del.status).toBe(204)
      })

      it('forbids deleting when only the target is editable (403)', async () => {
        const financeServer = await server('perm-fin-2', 'finance')
        const itServer = await server('perm-it-2', 'it')
        const rel = (await relate({ relationship_type_key: 'depends_on', source_asset_id: financeServer.id, target_asset_id: itServer.id })).body.data
        const res = await t.request('DELETE', `/api/v1/relationships/${rel.id}`, { key: editorKey })
        expect(res.status).toBe(403)
        expect(res.body.errors[0]).toMatchObject({ code: 'forbidden' })
      })

      it('treats an invisible end as unknown (422 on create), and hides relationships with one (404, absent from lists)', async () => {
        const hiddenApp = await application('perm-hidden', 'finance')
        const itServer = await server('perm-it-3', 'it')
        const create = await relate({ relationship_type_key: 'depends_on', source_asset_id: itServer.id, target_asset_id: hiddenApp.id }, editorKey)
        expect(create.status).toBe(422)
        expect(create.body.errors).toEqual([
          { status: '422', code: 'validation_failed', detail: `target asset ${hiddenApp.id} not found`, source: { pointer: '/target_asset_id' } },
        ])
        const rel = (await relate({ relationship_type_key: 'depends_on', source_asset_id: itServer.id, target_asset_id: hiddenApp.id })).body.data
        expect((await t.request('GET', `/api/v1/relationships/${rel.id}`, { key: editorKey })).status).toBe(404)
        expect((await t.request('DELETE', `/api/v1/relationships/${rel.id}`, { key: editorKey })).status).toBe(404)
        const list = await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${itServer.id}`, { key: editorKey })
        expect(list.body.data).toEqual([])
        expect(list.body.meta.page.total_items).toBe(0)
        expect((await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${itServer.id}`)).body.data).toEqual([rel])
      })
    })
  })

  describe(`${store}: GET /relationships list`, () => {
    let t: TestApp
    const ids: Record<string, string> = {}
    beforeAll(async () => {
      t = await createTestApp(store)
      const assets: [string, Record<string, unknown>][] = [
        ['crm', { asset_type_key: 'application', name: 'crm', properties: { code: 'crm' } }],
        ['erp', { asset_type_key: 'application', name: 'erp', properties: { code: 'erp' } }],
        ['web', { asset_type_key: 'server', name: 'web', properties: { hostname: 'web' } }],
        ['db', { asset_type_key: 'server', name: 'db', properties: { hostname: 'db' } }],
      ]
      for (const [key, body] of assets) ids[key] = (await t.request('POST', '/api/v1/assets', { body })).body.data.id
      const rels: [string, string, string][] = [
        ['runs_on', 'crm', 'web'], ['runs_on', 'crm', 'db'], ['runs_on', 'erp', 'db'], ['depends_on', 'crm', 'erp'],
      ]
      for (const [type, source, target] of rels) {
        const res = await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: type, source_asset_id: ids[source], target_asset_id: ids[target] } })
        expect(res.status).toBe(201)
        ids[`${type}:${source}:${target}`] = res.body.data.id
      }
    })
    afterAll(async () => t.close())

    const list = (query: string) => t.request('GET', `/api/v1/relationships${query}`)
    const idsOf = (body: { data: { id: string }[] }) => body.data.map((r) => r.id)

    it('lists every visible relationship with the list envelope and links', async () => {
      const res = await list('?page[size]=3')
      expect(res.status).toBe(200)
      expect(res.body.data).toHaveLength(3)
      expect(res.body.meta).toEqual({ page: { number: 1, size: 3, total_items: 4, total_items_exact: true, total_pages: 2 } })
      expect(res.body.links).toEqual({
        self: '/api/v1/relationships?page[size]=3&page[number]=1',
        first: '/api/v1/relationships?page[size]=3&page[number]=1',
        prev: null,
        next: '/api/v1/relationships?page[size]=3&page[number]=2',
        last: '/api/v1/relationships?page[size]=3&page[number]=2',
      })
      const second = await list('?page[size]=3&page[number]=2')
      expect([...idsOf(res.body), ...idsOf(second.body)].sort()).toEqual(
        ['runs_on:crm:web', 'runs_on:crm:db', 'runs_on:erp:db', 'depends_on:crm:erp'].map((k) => ids[k]).sort(),
      )
    })

    it('answers each record of a page as GET /relationships/{id} answers it', async () => {
      const id = ids['runs_on:crm:web']!
      const one = await t.request('GET', `/api/v1/relationships/${id}`)
      const listed = await list(`?filter[source_asset_id]=${ids.crm}&filter[target_asset_id]=${ids.web}`)
      const searched = await t.request('POST', '/api/v1/search/relationships', { body: { filter: { field: 'id', operator: 'equals', value: id } } })
      expectOneRecordPages(listed, searched, one.body.data)
    })

    it('filters by type, source and target (UUID or composite key)', async () => {
      expect(idsOf((await list('?filter[relationship_type_key]=depends_on')).body)).toEqual([ids['depends_on:crm:erp']])
      expect(idsOf((await list(`?filter[target_asset_id]=${ids.db}&sort=source_asset_id`)).body).sort()).toEqual([ids['runs_on:crm:db'], ids['runs_on:erp:db']].sort())
      expect(idsOf((await list('?filter[source_asset_id]=application:code:crm&filter[target_asset_id]=server:hostname:web')).body)).toEqual([ids['runs_on:crm:web']])
      expect(idsOf((await list('?filter[source_asset_id]=application:code:crm&filter[relationship_type_key]=runs_on')).body).sort()).toEqual([ids['runs_on:crm:web'], ids['runs_on:crm:db']].sort())
    })

    it('matches nothing for composite keys naming no asset', async () => {
      for (const ref of ['application:code:nope', 'note:body:x', 'spaceship:x:y', 'nothing']) {
        const res = await list(`?filter[source_asset_id]=${ref}`)
        expect(res.status, ref).toBe(200)
        expect(res.body.data, ref).toEqual([])
        expect(res.body.meta.page.total_items, ref).toBe(0)
      }
    })

    it('sorts by a field, descending with -, tie-broken by id', async () => {
      const res = await list('?sort=-relationship_type_key,id')
      expect(res.body.data.map((r: { relationship_type_key: string }) => r.relationship_type_key)).toEqual(['runs_on', 'runs_on', 'runs_on', 'depends_on'])
      const runsOn = res.body.data.slice(0, 3).map((r: { id: string }) => r.id)
      expect(runsOn).toEqual([...runsOn].sort())
    })

    it('expands ends on the list with include', async () => {
      const res = await list('?filter[relationship_type_key]=depends_on&include=source_asset.properties,target_asset')
      expect(res.body.data).toHaveLength(1)
      expect(res.body.data[0].source_asset).toMatchObject({ id: ids.crm, name: 'crm', properties: { code: 'crm' } })
      expect(res.body.data[0].target_asset).toEqual({ id: ids.erp, asset_type_key: 'application', name: 'erp', created_at: expect.stringMatching(TIMESTAMP), updated_at: expect.stringMatching(TIMESTAMP) })
    })

    it('answers 400 for unknown filter fields, unknown sort fields and bad pages', async () => {
      const cases: [string, string][] = [
        ['?filter[name]=x', 'invalid_filter'], ['?filter[created_at]=2026-01-01', 'invalid_filter'],
        ['?sort=name', 'invalid_sort'], ['?page[size]=101', 'invalid_page'], ['?page[number]=0', 'invalid_page'],
      ]
      for (const [q, code] of cases) {
        const res = await list(q)
        expect(res.status, q).toBe(400)
        expect(res.body.errors[0].code, q).toBe(code)
      }
    })
  })
}
