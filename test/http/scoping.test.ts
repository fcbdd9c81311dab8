import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'


/** ACME plus roles with null-domain, "*"-domain and domain-moving grants (CONTRACT §9). */
function scopedSetup(editorRoles = ['it_editor', 'unassigned', 'notes_reader', 'it_mover']) {
  const setup = structuredClone(ACME) as typeof ACME & { roles: unknown[] }
  setup.roles.push(
    { key: 'unassigned', name: 'No domain', grants: [{ access_domain_key: null, asset_type_keys: ['*'], level: 'edit' }] },
    { key: 'notes_reader', name: 'Notes', grants: [{ access_domain_key: '*', asset_type_keys: ['note'], level: 'view' }] },
    { key: 'mover', name: 'Mover', grants: [
      { access_domain_key: 'it', asset_type_keys: ['*'], level: 'edit_access_domain' },
      { access_domain_key: 'finance', asset_type_keys: ['*'], level: 'edit_access_domain' }] },
    { key: 'it_mover', name: 'IT mover', grants: [
      { access_domain_key: 'it', asset_type_keys: ['*'], level: 'edit_access_domain' },
      { access_domain_key: 'finance', asset_type_keys: ['*'], level: 'edit' }] },
  )
  setup.users[0]!.role_keys = ['all', 'it_editor', 'unassigned', 'notes_reader', 'mover', 'it_mover']
  setup.users[1]!.role_keys = editorRoles
  return setup as unknown as SetupFile
}

const ALL = ['a-fin', 'a-it', 'n-fin', 'n-it', 'n-none', 's-fin', 's-it', 's-none']

for (const store of STORES) {
  describe(`${store}: roles scope data`, () => {
    let t: TestApp
    const id: Record<string, string> = {}
    const rel: Record<string, string> = {}
    const k: Record<string, string> = {}

    const seed = async (type: string, name: string, domain: string | null) => {
      const properties = type === 'server' ? { hostname: name } : type === 'application' ? { code: name } : {}
      const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: type, name, access_domain_key: domain, properties } })
      expect(res.status, name).toBe(201)
      id[name] = res.body.data.id
    }
    const link = async (name: string, source: string, target: string) => {
      const body = { relationship_type_key: 'runs_on', source_asset_id: id[source], target_asset_id: id[target] }
      const res = await t.request('POST', '/api/v1/relationships', { body })
      expect(res.status, name).toBe(201)
      rel[name] = res.body.data.id
    }
    const names = async (key: string, query = '') => {
      const res = await t.request('GET', `/api/v1/assets?page[size]=100&sort=name${query}`, { key })
      expect(res.status).toBe(200)
      expect(res.body.meta.page.total_items).toBe(res.body.data.length)
      return res.body.data.map((a: { name: string }) => a.name)
    }

    beforeAll(async () => {
      t = await createTestApp(store, scopedSetup())
      for (const [type, prefix] of [['server', 's'], ['note', 'n'], ['application', 'a']] as const) {
        await seed(type, `${prefix}-it`, 'it')
        await seed(type, `${prefix}-fin`, 'finance')
        if (type !== 'application') await seed(type, `${prefix}-none`, null)
      }
      await link('it-it', 'a-it', 's-it')
      await link('it-fin', 'a-it', 's-fin')
      await link('fin-it', 'a-fin', 's-it')
      await link('it-none', 'a-it', 's-none')
      const editor = (roles: string[]) => t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles })
      k.it = await editor(['it_editor'])
      k.none = await editor(['unassigned'])
      k.notes = await editor(['notes_reader'])
      k.combo = await editor(['it_editor', 'notes_reader'])
      k.itMover = await editor(['it_mover'])
      k.mover = await t.givenKey({ type: 'Admin', roles: ['mover'] })
      k.adminIt = await t.givenKey({ type: 'Admin', roles: ['it_editor'] })
      k.viewerAll = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer', roles: ['all'] })
      k.ownerViewer = await t.givenKey({ type: 'Viewer', roles: ['all'] })
    })
    afterAll(async () => t.close())

    it('lists exactly what the grants reach, counted in the same statement', async () => {
      expect(await names(k.it!)).toEqual(['a-it', 'n-it', 's-fin', 's-it'])
      expect(await names(k.adminIt!)).toEqual(['a-it', 'n-it', 's-fin', 's-it'])
      expect(await names(k.none!)).toEqual(['n-none', 's-none'])
      expect(await names(k.notes!)).toEqual(['n-fin', 'n-it', 'n-none'])
      expect(await names(k.combo!)).toEqual(['a-it', 'n-fin', 'n-it', 'n-none', 's-fin', 's-it'])
      expect(await names(k.viewerAll!)).toEqual(ALL)
    })

    it('never widens with a filter', async () => {
      expect(await names(k.it!, '&filter[access_domain_key]=finance')).toEqual(['s-fin'])
      expect(await names(k.it!, '&filter[asset_type_key]=note')).toEqual(['n-it'])
    })

    it('answers 404 for a hidden asset, by id and by composite key, like an unknown one', async () => {
      expect((await t.request('GET', `/api/v1/assets/${id['s-fin']}`, { key: k.it })).status).toBe(200)
      for (const ref of [id['n-fin'], id['s-none'], 'server:hostname:s-none', 'application:code:a-fin']) {
        const res = await t.request('GET', `/api/v1/assets/${ref}`, { key: k.it })
        expect(res.status, ref).toBe(404)
        expect(res.body).toEqual({ errors: [{ status: '404', code: 'not_found', detail: `asset ${ref} not found` }] })
      }
    })

    it('needs edit for the type in the domain to create', async () => {
      const create = (key: string, type: string, domain: string | null) =>
        t.request('POST', '/api/v1/assets', { key, body: { asset_type_key: type, name: `new-${type}`, access_domain_key: domain } })
      expect((await create(k.it!, 'note', 'it')).status).toBe(201)
      expect((await create(k.none!, 'note', null)).status).toBe(201)
      for (const [key, domain] of [[k.it, 'finance'], [k.it, null], [k.notes, 'it'], [k.none, 'it']] as const) {
        const res = await create(key!, 'note', domain)
        expect(res.status, `${domain}`).toBe(403)
        expect(res.body.errors[0].code).toBe('forbidden')
      }
    })

    it('answers 403 to writes on visible but read-only assets and 404 on hidden ones', async () => {
      const patch = (key: string, name: string) => t.request('PATCH', `/api/v1/assets/${id[name]}`, { key, body: { properties: { owner: 'x' } } })
      expect((await patch(k.it!, 's-it')).status).toBe(200)
      const readOnly = await patch(k.it!, 's-fin')
      expect(readOnly.status).toBe(403)
      expect(readOnly.body.errors[0]).toEqual({
        status: '403', code: 'forbidden', detail: "the key's roles do not allow to change server assets in access domain finance",
      })
      expect((await patch(k.it!, 'n-fin')).status).toBe(404)
      // The highest grant wins: it_editor (delete) over notes_reader (view) in it; only view in finance.
      expect((await t.request('PATCH', `/api/v1/assets/${id['n-it']}`, { key: k.combo, body: { name: 'n-it' } })).status).toBe(200)
      expect((await t.request('PATCH', `/api/v1/assets/${id['n-fin']}`, { key: k.combo, body: { name: 'n-fin' } })).status).toBe(403)
    })

    it('needs delete to archive', async () => {
      const victim = (await t.request('POST', '/api/v1/assets', { key: k.none, body: { asset_type_key: 'note', name: 'tmp', access_domain_key: null } })).body.data
      const edit = await t.request('DELETE', `/api/v1/assets/${victim.id}`, { key: k.none })
      expect(edit.status).toBe(403)
      expect(edit.body.errors[0].detail).toBe("the key's roles do not allow to archive note assets in no access domain")
      const it_ = (await t.request('POST', '/api/v1/assets', { key: k.it, body: { asset_type_key: 'note', name: 'tmp2', access_domain_key: 'it' } })).body.data
      expect((await t.request('DELETE', `/api/v1/assets/${it_.id}`, { key: k.it })).status).toBe(204)
      expect((await t.request('DELETE', `/api/v1/assets/${id['s-fin']}`, { key: k.it })).status).toBe(403)
    })

    it('needs edit_access_domain on both domains to move an asset', async () => {
      const move = (key: string, name: string, domain: string | null) =>
        t.request('PATCH', `/api/v1/assets/${id[name]}`, { key, body: { access_domain_key: domain } })
      expect((await move(k.it!, 'n-it', 'finance')).status).toBe(403)
      const half = await move(k.itMover!, 'n-it', 'finance')
      expect(half.status).toBe(403)
      expect(half.body.errors[0].detail).toBe('moving an asset to another access domain needs edit_access_domain on both domains')
      expect((await move(k.mover!, 'n-it', null)).status).toBe(403)
      const moved = await move(k.mover!, 'n-it', 'finance')
      expect(moved.status).toBe(200)
      expect(moved.body.data.access_domain_key).toBe('finance')
      expect((await move(k.mover!, 'n-it', 'it')).status).toBe(200)
    })

    it('never lets a Viewer key write, whatever its roles', async () => {
      for (const key of [k.viewerAll!, k.ownerViewer!]) {
        const writes = [
          await t.request('POST', '/api/v1/assets', { key, body: { asset_type_key: 'note', name: 'v', access_domain_key: 'it' } }),
          await t.request('PATCH', `/api/v1/assets/${id['n-it']}`, { key, body: { name: 'v' } }),
          await t.request('DELETE', `/api/v1/assets/${id['n-it']}`, { key }),
          await t.request('POST', '/api/v1/relationships', { key, body: { relationship_type_key: 'depends_on', source_asset_id: id['n-it'], target_asset_id: id['s-it'] } }),
        ]
        expect(writes.map((r) => r.status)).toEqual([403, 403, 403, 403])
      }
    })

    it('takes a role away from a key when its owner loses it', async () => {
      const before = await names(k.notes!)
      expect(before).toEqual(expect.arrayContaining(['n-fin', 'n-it', 'n-none']))
      await applySetup(t.store.db, scopedSetup(['it_editor', 'unassigned', 'it_mover']))
      // The invalidation reaches this process asynchronously on PostgreSQL; do not wait for it.
      t.app.authenticator.invalidate()
      expect(await names(k.notes!)).toEqual([])
      await applySetup(t.store.db, scopedSetup())
      t.app.authenticator.invalidate()
      expect(await names(k.notes!)).toEqual(before)
    })

    it('shows a relationship only when both ends are visible', async () => {
      const list = await t.request('GET', '/api/v1/relationships?page[size]=100', { key: k.it })
      expect(list.status).toBe(200)
      expect(list.body.data.map((r: { id: string }) => r.id).sort()).toEqual([rel['it-it'], rel['it-fin']].sort())
      expect(list.body.meta.page.total_items).toBe(2)
      expect((await t.request('GET', `/api/v1/relationships/${rel['fin-it']}`, { key: k.it })).status).toBe(404)
      expect((await t.request('GET', `/api/v1/relationships/${rel['it-none']}`, { key: k.it })).status).toBe(404)
      expect((await t.request('GET', `/api/v1/relationships/${rel['it-it']}`, { key: k.it })).status).toBe(200)
    })

    it('includes only visible relationships and related assets', async () => {
      const res = await t.request('GET', `/api/v1/assets/${id['a-it']}?include=relationships,relationships.related_asset`, { key: k.it })
      expect(res.status).toBe(200)
      const related = res.body.data.relationships.map((r: { related_asset: { name: string } }) => r.related_asset.name).sort()
      expect(related).toEqual(['s-fin', 's-it'])
      const list = await t.request('GET', '/api/v1/assets?filter[name]=s-it&include=relationships', { key: k.it })
      expect(list.body.data[0].relationships.map((r: { id: string }) => r.id)).toEqual([rel['it-it']])
    })

    it('needs edit on the source to create or delete a relationship', async () => {
      const body = (source: string, target: string) => ({ relationship_type_key: 'depends_on', source_asset_id: id[source], target_asset_id: id[target] })
      expect((await t.request('POST', '/api/v1/relationships', { key: k.it, body: body('n-it', 's-fin') })).status).toBe(201)
      expect((await t.request('POST', '/api/v1/relationships', { key: k.it, body: body('s-fin', 's-it') })).status).toBe(403)
      const hidden = await t.request('POST', '/api/v1/relationships', { key: k.it, body: body('n-it', 'n-fin') })
      expect(hidden.status).toBe(422)
      expect(hidden.body.errors[0].detail).toBe(`target asset ${id['n-fin']} not found`)
      expect((await t.request('DELETE', `/api/v1/relationships/${rel['it-it']}`, { key: k.notes })).status).toBe(404)
      expect((await t.request('DELETE', `/api/v1/relationships/${rel['it-fin']}`, { key: k.it })).status).toBe(204)
    })

    it('scopes bulk writes: nothing is written when one item is out of reach', async () => {
      const create = await t.request('POST', '/api/v1/bulk/assets', {
        key: k.it,
        body: [{ asset_type_key: 'note', name: 'bulk-it', access_domain_key: 'it' }, { asset_type_key: 'note', name: 'bulk-fin', access_domain_key: 'finance' }],
      })
      expect(create.status).toBe(403)
      expect(create.body.errors.map((e: { source: unknown }) => e.source)).toEqual([{ pointer: '/1' }])
      expect(await names(t.adminKey, '&filter[name]=bulk-it')).toEqual([])
      const patchReadOnly = await t.request('PATCH', '/api/v1/bulk/assets', { key: k.it, body: [{ id: id['s-fin'], name: 'x' }] })
      expect(patchReadOnly.status).toBe(403)
      const patchHidden = await t.request('PATCH', '/api/v1/bulk/assets', { key: k.it, body: [{ id: id['n-fin'], name: 'x' }] })
      expect(patchHidden.body.errors[0].detail).toBe(`asset ${id['n-fin']} not found`)
    })

    it('scopes bulk relationships: edit on each source, view on each target, all or nothing', async () => {
      const item = (type: string, source: string, target: string, ref?: string) =>
        ({ relationship_type_key: type, source_asset_id: id[source], target_asset_id: id[target], ...(ref ? { client_ref: ref } : {}) })
      const stored = async (source: string, target: string): Promise<number> => (await t.store.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM relationships WHERE relationship_type_key = 'depends_on' AND source_asset_id = $1 AND target_asset_id = $2`,
        [id[source], id[target]])).rows[0]!.n
      const forbidden = await t.request('POST', '/api/v1/bulk/relationships', {
        key: k.it, body: [item('depends_on', 'n-it', 'a-it', 'ok'), item('depends_on', 's-fin', 's-it', 'ro')],
      })
      expect(forbidden.status).toBe(403)
      expect(forbidden.body.errors.map((e: { source: unknown; meta: unknown }) => [e.source, e.meta])).toEqual([
        [{ pointer: '/1/source_asset_id' }, { index: 1, client_ref: 'ro' }],
      ])
      const hidden = await t.request('POST', '/api/v1/bulk/relationships', {
        key: k.it, body: [item('depends_on', 'n-it', 'a-it'), item('depends_on', 'n-it', 'n-fin'), item('runs_on', 'n-it', 's-it')],
      })
      expect(hidden.status).toBe(422)
      expect(hidden.body.errors.map((e: { detail: string }) => e.detail)).toEqual([
        `target asset ${id['n-fin']} not found`,
        'relationship type runs_on does not allow source assets of type note; it allows application',
      ])
      expect(await stored('n-it', 'a-it')).toBe(0)
      const viewer = await t.request('POST', '/api/v1/bulk/relationships', { key: k.viewerAll, body: [item('depends_on', 'n-it', 'a-it')] })
      expect(viewer.status).toBe(403)
      expect(await stored('n-it', 'a-it')).toBe(0)
      // A finance server is visible to the IT editor, so it may be a target; an IT note may be edited.
      const ok = await t.request('POST', '/api/v1/bulk/relationships', { key: k.it, body: [item('depends_on', 'n-it', 'a-it'), item('depends_on', 'a-it', 's-fin')] })
      expect(ok.status).toBe(201)
      expect([await stored('n-it', 'a-it'), await stored('a-it', 's-fin')]).toEqual([1, 1])
    })

    it('scopes search', async () => {
      const assets = await t.request('POST', '/api/v1/search/assets', {
        key: k.it, body: { filter: { field: 'name', operator: 'in', value: ALL }, page: { size: 100 } },
      })
      expect(assets.status).toBe(200)
      expect(assets.body.data.map((a: { name: string }) => a.name).sort()).toEqual(['a-it', 'n-it', 's-fin', 's-it'])
      const rels = await t.request('POST', '/api/v1/search/relationships', { key: k.it, body: {} })
      expect(rels.body.data.map((r: { id: string }) => r.id)).not.toContain(rel['fin-it'])
    })

    it('scopes analytics', async () => {
      const res = await t.request('POST', '/api/v1/analytics/assets', {
        key: k.it, body: { filter: { field: 'name', operator: 'in', value: ALL }, measures: [{ type: 'count' }], group_by: ['asset_type_key'] },
      })
      expect(res.status).toBe(200)
      const counts = Object.fromEntries(res.body.data.map((g: { group: { asset_type_key: string }; measures: { count: number } }) => [g.group.asset_type_key, g.measures.count]))
      expect(counts).toEqual({ application: 1, note: 1, server: 2 })
    })
  })
}
