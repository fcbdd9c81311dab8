import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { bulkCreateAssets, bulkCreateRelationships } from '../helpers/seed.js'

/**
 * CONTRACT §1, the `total_items` rule: exact up to 10,000 matches, capped beyond
 * (`total_items_exact: false`, no `links.last`) unless `page[count]=exact` asks; the live counters
 * of migration 0008 stay right under concurrent writers and archives; scoped keys get their own
 * counts.
 */

// ACME plus a role that sees servers in every domain and nothing else.
const SETUP = {
  ...ACME,
  roles: [...ACME.roles, { key: 'servers', name: 'Servers', grants: [{ access_domain_key: '*', asset_type_keys: ['server'], level: 'view' }] }],
  users: ACME.users.map((u) => (u.email === 'owner@acme.test' ? { ...u, role_keys: [...u.role_keys, 'servers'] } : u)),
}

const NOTES = 10_001
const noteName = (i: number) => `n-${String(i).padStart(5, '0')}`
// Even notes in `it` (5,001), odd ones in `finance` (5,000).
const NOTE_ASSETS = Array.from({ length: NOTES }, (_, i) => ({
  name: noteName(i), access_domain_key: i % 2 === 0 ? 'it' : 'finance', properties: { body: i % 2 === 0 ? 'even' : 'odd' },
}))
const SERVER_ASSETS = ['it', 'it', 'it', 'finance', 'finance'].map((domain, i) => ({ name: `s-${i}`, access_domain_key: domain, properties: { hostname: `s-${i}` } }))
const LIVE = NOTES + SERVER_ASSETS.length

const BASE = '/api/v1'

for (const store of STORES) {
  describe(`${store}: total_items past 10,000 (CONTRACT §1)`, () => {
    let t: TestApp
    let serversKey = ''
    let itKey = ''

    // Read-only tests share one store: 10,006 assets and a ring of 10,001 relationships.
    beforeAll(async () => {
      t = await createTestApp(store, SETUP)
      serversKey = await t.givenKey({ type: 'Admin', roles: ['servers'] })
      itKey = await t.givenKey({ type: 'Admin', roles: ['it_editor'] })
      const notes = await bulkCreateAssets(t, 'note', NOTE_ASSETS)
      await bulkCreateAssets(t, 'server', SERVER_ASSETS)
      await bulkCreateRelationships(t, notes.map((id, i) => ({ relationship_type_key: 'depends_on', source_asset_id: id, target_asset_id: notes[(i + 1) % NOTES]! })))
    }, 600_000)
    afterAll(async () => t.close())

    const get = async (url: string, key?: string) => {
      const res = await t.request('GET', `/api/v1${url}`, key === undefined ? {} : { key })
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200)
      return res.body
    }
    const search = async (target: string, body: unknown, key?: string) => {
      const res = await t.request('POST', `/api/v1/search/${target}`, { body, ...(key === undefined ? {} : { key }) })
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200)
      return res.body
    }

    it('caps an unfiltered list at 10,000, with no last link and a next one', async () => {
      const body = await get('/assets?page[size]=100')
      expect(body.data).toHaveLength(100)
      expect(body.meta).toEqual({ page: { number: 1, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 } })
      expect(body.links).toEqual({
        self: `${BASE}/assets?page[size]=100&page[number]=1`,
        first: `${BASE}/assets?page[size]=100&page[number]=1`,
        prev: null,
        next: `${BASE}/assets?page[size]=100&page[number]=2`,
        last: null,
      })
    })

    it('answers the exact figure on request, with the last link', async () => {
      const body = await get('/assets?page[size]=100&page[count]=exact')
      expect(body.meta.page).toEqual({ number: 1, size: 100, total_items: LIVE, total_items_exact: true, total_pages: 101 })
      expect(body.links.last).toBe(`${BASE}/assets?page[size]=100&page[count]=exact&page[number]=101`)
    })

    it('counts a type-only list exactly up to 10,000 and caps it beyond', async () => {
      expect((await get('/assets?filter[asset_type_key]=server&page[size]=2')).meta.page)
        .toEqual({ number: 1, size: 2, total_items: 5, total_items_exact: true, total_pages: 3 })
      expect((await get('/assets?filter[asset_type_key]=note&page[size]=10')).meta.page)
        .toEqual({ number: 1, size: 10, total_items: 10_000, total_items_exact: false, total_pages: 1000 })
      expect((await get('/assets?filter[asset_type_key]=note&page[size]=10&page[count]=exact')).meta.page)
        .toEqual({ number: 1, size: 10, total_items: NOTES, total_items_exact: true, total_pages: 1001 })
      expect((await get('/assets?filter[asset_type_key]=application&page[size]=10&page[number]=3')).meta.page)
        .toEqual({ number: 3, size: 10, total_items: 0, total_items_exact: true, total_pages: 0 })
    })

    it('counts a filtered list exactly up to 10,000', async () => {
      const body = await get('/assets?filter[properties.body]=even&page[size]=100')
      expect(body.meta.page).toEqual({ number: 1, size: 100, total_items: 5_001, total_items_exact: true, total_pages: 51 })
      expect(body.links.last).toBe(`${BASE}/assets?filter[properties.body]=even&page[size]=100&page[number]=51`)
    })

    it('caps a filtered search beyond 10,000 and counts it exactly on request', async () => {
      const filter = { field: 'name', operator: 'starts_with', value: 'n-' }
      expect((await search('assets', { filter, page: { size: 100 } })).meta.page)
        .toEqual({ number: 1, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 })
      expect((await search('assets', { filter, page: { size: 100, count: 'exact' } })).meta.page)
        .toEqual({ number: 1, size: 100, total_items: NOTES, total_items_exact: true, total_pages: 101 })
      expect((await search('assets', { page: { count: 'exact' } })).meta.page)
        .toEqual({ number: 1, size: 50, total_items: LIVE, total_items_exact: true, total_pages: 201 })
      expect((await search('assets', { filter: { field: 'asset_type_key', operator: 'equals', value: 'note' } })).meta.page)
        .toEqual({ number: 1, size: 50, total_items: 10_000, total_items_exact: false, total_pages: 200 })
    })

    it('serves pages past the 10,000th item while items follow', async () => {
      const last = await get('/assets?filter[asset_type_key]=note&sort=name&page[size]=100&page[number]=100')
      expect(last.data.map((a: { name: string }) => a.name)).toEqual(NOTE_ASSETS.slice(9_900, 10_000).map((a) => a.name))
      expect(last.meta.page).toEqual({ number: 100, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 })
      expect(last.links.next).toBe(`${BASE}/assets?filter[asset_type_key]=note&sort=name&page[size]=100&page[number]=101`)
      const past = await get('/assets?filter[asset_type_key]=note&sort=name&page[size]=100&page[number]=101')
      expect(past.data.map((a: { name: string }) => a.name)).toEqual(['n-10000'])
      expect(past.meta.page).toEqual({ number: 101, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 })
      expect(past.links.prev).toBe(`${BASE}/assets?filter[asset_type_key]=note&sort=name&page[size]=100&page[number]=100`)
      expect(past.links.next).toBeNull()
      expect(past.links.last).toBeNull()
      const beyond = await get('/assets?filter[asset_type_key]=note&sort=name&page[size]=100&page[number]=102')
      expect(beyond.data).toEqual([])
      expect(beyond.links.next).toBeNull()
    })

    it('counts what a scoped key sees, not what the counters hold', async () => {
      // The servers role sees every server in every domain: its type-only count may use the counters…
      expect((await get('/assets?filter[asset_type_key]=server&page[size]=2', serversKey)).meta.page)
        .toEqual({ number: 1, size: 2, total_items: 5, total_items_exact: true, total_pages: 3 })
      // …but its unfiltered list holds servers only.
      expect((await get('/assets?page[size]=2', serversKey)).meta.page)
        .toEqual({ number: 1, size: 2, total_items: 5, total_items_exact: true, total_pages: 3 })
      expect((await get('/assets?filter[asset_type_key]=note&page[size]=2&page[number]=2', serversKey)).meta.page)
        .toEqual({ number: 2, size: 2, total_items: 0, total_items_exact: true, total_pages: 0 })
      // it_editor: everything in `it` (5,001 notes, 3 servers) and the servers of `finance` (2).
      expect((await get('/assets?page[size]=10', itKey)).meta.page)
        .toEqual({ number: 1, size: 10, total_items: 5_006, total_items_exact: true, total_pages: 501 })
      expect((await get('/assets?filter[asset_type_key]=note&page[size]=10', itKey)).meta.page)
        .toEqual({ number: 1, size: 10, total_items: 5_001, total_items_exact: true, total_pages: 501 })
      expect((await search('assets', { page: { size: 10 } }, itKey)).meta.page)
        .toEqual({ number: 1, size: 10, total_items: 5_006, total_items_exact: true, total_pages: 501 })
    })

    it('caps relationship lists and searches the same way', async () => {
      const list = await get('/relationships?page[size]=100')
      expect(list.meta.page).toEqual({ number: 1, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 })
      expect(list.links.last).toBeNull()
      expect(list.links.next).toBe(`${BASE}/relationships?page[size]=100&page[number]=2`)
      expect((await get('/relationships?page[size]=100&page[count]=exact')).meta.page)
        .toEqual({ number: 1, size: 100, total_items: NOTES, total_items_exact: true, total_pages: 101 })
      expect((await search('relationships', { page: { size: 100 } })).meta.page)
        .toEqual({ number: 1, size: 100, total_items: 10_000, total_items_exact: false, total_pages: 100 })
      expect((await search('relationships', { page: { size: 100, count: 'exact' } })).meta.page)
        .toEqual({ number: 1, size: 100, total_items: NOTES, total_items_exact: true, total_pages: 101 })
      // it_editor sees a relationship only when it sees both ends: the ring's wrap n-10000 → n-00000.
      const scoped = await get('/relationships?page[size]=1&page[number]=2', itKey)
      expect(scoped.data).toEqual([])
      expect(scoped.meta.page).toEqual({ number: 2, size: 1, total_items: 1, total_items_exact: true, total_pages: 1 })
    })

    it('rejects a count mode other than exact with 400 invalid_page', async () => {
      const list = await t.request('GET', '/api/v1/assets?page[count]=approximate')
      expect(list.status).toBe(400)
      expect(list.body.errors[0]).toMatchObject({ status: '400', code: 'invalid_page', source: { parameter: 'page[count]' } })
      const body = await t.request('POST', '/api/v1/search/assets', { body: { page: { count: 'approximate' } } })
      expect(body.status).toBe(400)
      expect(body.body.errors[0]).toMatchObject({ status: '400', code: 'invalid_page', source: { pointer: '/page/count' } })
    })
  })

  describe(`${store}: live asset counters under concurrent writes`, () => {
    let t: TestApp
    beforeAll(async () => { t = await createTestApp(store) })
    afterAll(async () => t.close())

    const app = (code: string) => ({ asset_type_key: 'application', name: code, properties: { code } })
    const total = async (url: string) => {
      const res = await t.request('GET', `/api/v1${url}`)
      expect(res.status).toBe(200)
      return res.body.meta.page.total_items as number
    }
    const truth = async () => {
      const counted = await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE org_id = $1 AND archived_at IS NULL', [t.orgId])
      const counters = await t.store.db.query<{ asset_type_key: string; live: number }>(
        'SELECT asset_type_key, live::int AS live FROM asset_counts WHERE org_id = $1 AND live <> 0 ORDER BY 1', [t.orgId])
      return { counted: counted.rows[0]!.n, counters: counters.rows }
    }

    it('stay right after concurrent creates, bulk creates, updates and archives', async () => {
      const singles = await Promise.all(Array.from({ length: 12 }, (_, i) => t.request('POST', '/api/v1/assets', { body: app(`single-${i}`) })))
      const bulks = await Promise.all([0, 1, 2, 3].map((b) =>
        t.request('POST', '/api/v1/bulk/assets', { body: Array.from({ length: 25 }, (_, i) => app(`bulk-${b}-${i}`)) })))
      for (const res of [...singles, ...bulks]) expect(res.status).toBe(201)
      const created = [...singles.map((r) => r.body.data.id as string), ...bulks.flatMap((r) => r.body.data.map((d: { id: string }) => d.id as string))]
      expect(created).toHaveLength(112)

      // Archives, renames, more creates and a failing bulk (a taken code), all at once.
      const mixed = await Promise.all([
        ...created.slice(0, 10).map((id) => t.request('DELETE', `/api/v1/assets/${id}`)),
        ...Array.from({ length: 6 }, (_, i) => t.request('POST', '/api/v1/assets', { body: app(`late-${i}`) })),
        t.request('POST', '/api/v1/bulk/assets', { body: Array.from({ length: 25 }, (_, i) => app(`late-bulk-${i}`)) }),
        t.request('POST', '/api/v1/bulk/assets', { body: [app('never-1'), app('bulk-3-24')] }),
        t.request('PATCH', '/api/v1/bulk/assets', { body: created.slice(50, 70).map((id, i) => ({ id, name: `renamed-${i}` })) }),
        ...created.slice(10, 13).map((id) => t.request('DELETE', `/api/v1/assets/${id}`)),
      ])
      expect(mixed.map((r) => r.status)).toEqual([...Array(10).fill(204), ...Array(6).fill(201), 201, 409, 200, ...Array(3).fill(204)])

      const live = 112 - 10 + 6 + 25 - 3
      expect(await truth()).toEqual({ counted: live, counters: [{ asset_type_key: 'application', live }] })
      // Full first pages, so the count comes from the counters, not from the page.
      expect(await total('/assets?page[size]=1')).toBe(live)
      expect(await total('/assets?filter[asset_type_key]=application&page[size]=1')).toBe(live)
      expect(await total('/assets?filter[asset_type_key]=application&page[size]=1&page[count]=exact')).toBe(live)
      expect(await total('/assets?filter[asset_type_key]=server&page[size]=1&page[number]=2')).toBe(0)
    })
  })
}
