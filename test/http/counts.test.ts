import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServerProcess } from '../helpers/processes.js'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { bulkCreateAssets, bulkCreateRelationships } from '../helpers/seed.js'
import { metrics } from '../../src/ops/metrics.js'
import { dataVersionSql } from '../../src/events/sql.js'

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

    it('are read with the page on PostgreSQL, and remembered on PGlite', async () => {
      // A write: nothing remembered from the test before.
      expect((await t.request('POST', '/api/v1/assets', { body: app('counted-with-the-page') })).status).toBe(201)
      await t.settled()
      const statements: string[] = []
      t.store.db.onQuery = (sql) => void (/asset_counts|FROM assets a\b/.test(sql) && statements.push(/FROM assets a\b/.test(sql) ? 'page' : 'counters'))
      try {
        const first = await total('/assets?filter[asset_type_key]=application&page[size]=1')
        const again = await total('/assets?filter[asset_type_key]=application&page[size]=1')
        expect(again).toBe(first)
        // The page reads the counters itself: exact, whatever another process wrote meanwhile.
        // PGlite's memo answers the second request with no statement besides its page.
        expect(statements).toEqual(t.store.db.kind === 'postgres' ? ['page', 'page'] : ['page', 'counters', 'page'])
        statements.length = 0
        // Past the end the page brings no row: PostgreSQL reads the counters on their own.
        expect(await total(`/assets?filter[asset_type_key]=application&page[size]=100&page[number]=${Math.ceil(first / 100) + 1}`)).toBe(first)
        expect(statements).toEqual(t.store.db.kind === 'postgres' ? ['page', 'counters'] : ['page'])
      } finally {
        t.store.db.onQuery = null
      }
    })
  })

  describe(`${store}: remembered counts follow every write (counts/cache.ts)`, () => {
    let t: TestApp
    beforeAll(async () => { t = await createTestApp(store, undefined, { eventRelayIntervalMs: 20 }) })
    afterAll(async () => t.close())

    // One item per page: every answer needs a count (a short page would say it by itself).
    const PROD = { filter: { field: 'properties.environment', operator: 'equals', value: 'prod' }, page: { size: 1 } }
    const server = (name: string, environment: string) => ({ asset_type_key: 'server', name, properties: { hostname: name, environment } })
    let counts = 0
    /** Statements that ask for the data version alone (PostgreSQL): a page reads it along with its rows. */
    let versionsAsked = 0
    /**
     * Every event written so far is stamped, and the relay's notifications of it (PostgreSQL)
     * have reached this app: they arrive on the listening connection in order, before a sentinel
     * sent after them. From then on only this test's requests move the cache.
     */
    const countingStatements = () => {
      counts = 0
      versionsAsked = 0
      t.store.db.onQuery = (sql) => {
        if (/^SELECT count\(\*\)/.test(sql)) counts++
        if (sql.startsWith(`SELECT (${dataVersionSql('$1')})`)) versionsAsked++
      }
    }
    const searched = async () => {
      const res = await t.request('POST', '/api/v1/search/assets', { body: PROD })
      expect(res.status).toBe(200)
      return res.body.meta.page.total_items as number
    }
    const listed = async () => {
      const res = await t.request('GET', '/api/v1/assets?filter[properties.environment]=prod&page[size]=1')
      expect(res.status).toBe(200)
      return res.body.meta.page.total_items as number
    }

    it('counts a repeated filtered search once, and again after each kind of write', async () => {
      const created = await t.request('POST', '/api/v1/bulk/assets', { body: [server('c-1', 'prod'), server('c-2', 'prod'), server('c-3', 'dev')] })
      expect(created.status).toBe(201)
      const [a, b, c] = created.body.data.map((d: { id: string }) => d.id)
      await t.settled()
      countingStatements()
      try {
        expect([await searched(), await searched(), await listed(), await listed()]).toEqual([2, 2, 2, 2])
        // One count per statement (the search's and the list's), not one per request.
        expect(counts).toBe(2)
        // On PostgreSQL the data version a remembered count is answered for came with the page.
        expect(versionsAsked).toBe(0)
        // Past the end the page brings no row: PostgreSQL asks the version on its own (PGlite has none).
        const past = await t.request('POST', '/api/v1/search/assets', { body: { ...PROD, page: { size: 1, number: 5 } } })
        expect(past.body.meta.page.total_items).toBe(2)
        expect(versionsAsked).toBe(t.store.db.kind === 'postgres' ? 1 : 0)
        expect(counts).toBe(2)
        // Cache-Control: no-cache counts afresh.
        const fresh = await t.request('POST', '/api/v1/search/assets', { body: PROD, headers: { 'cache-control': 'no-cache' } })
        expect(fresh.body.meta.page.total_items).toBe(2)
        expect(counts).toBe(3)
        expect((await t.request('POST', '/api/v1/assets', { body: server('c-4', 'prod') })).status).toBe(201)
        expect([await searched(), await listed()]).toEqual([3, 3])
        expect((await t.request('PATCH', `/api/v1/assets/${c}`, { body: { properties: { environment: 'prod' } } })).status).toBe(200)
        expect([await searched(), await listed()]).toEqual([4, 4])
        expect((await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: a, properties: { environment: 'dev' } }] })).status).toBe(200)
        expect([await searched(), await listed()]).toEqual([3, 3])
        expect((await t.request('DELETE', `/api/v1/assets/${b}`)).status).toBe(204)
        expect([await searched(), await listed()]).toEqual([2, 2])
        // A dry run and a failing write change nothing, and the figure stands.
        expect((await t.request('POST', '/api/v1/assets?dry_run=true', { body: server('c-5', 'prod') })).status).toBe(200)
        expect((await t.request('POST', '/api/v1/bulk/assets', { body: [server('c-6', 'prod'), server('c-4', 'prod')] })).status).toBe(409)
        expect([await searched(), await listed()]).toEqual([2, 2])
        // A PATCH that changes nothing writes nothing, and is not counted again.
        await t.settled()
        await searched()
        await listed()
        const before = counts
        expect((await t.request('PATCH', `/api/v1/assets/${c}`, { body: { properties: { environment: 'prod' } } })).status).toBe(200)
        expect([await searched(), await listed()]).toEqual([2, 2])
        expect(counts).toBe(before)
      } finally {
        t.store.db.onQuery = null
      }
    })

    it('remembers an analytics answer until the next write, and computes it afresh on Cache-Control: no-cache', async () => {
      const body = { group_by: ['properties.environment'], filter: { field: 'name', operator: 'starts_with', value: 'an-' } }
      expect((await t.request('POST', '/api/v1/bulk/assets', { body: [server('an-1', 'prod'), server('an-2', 'dev')] })).status).toBe(201)
      await t.settled()
      let aggregates = 0
      t.store.db.onQuery = (sql) => void (/assets_typed_\w+" a .*GROUP BY/.test(sql) && aggregates++)
      const groups = async (headers: Record<string, string> = {}) => {
        const res = await t.request('POST', '/api/v1/analytics/assets', { body, headers })
        expect(res.status).toBe(200)
        return res.body.data.map((row: { group: Record<string, string>; measures: { count: number } }) => [row.group['properties.environment'], row.measures.count])
      }
      // kbis_result_cache_reads_total{kind="analytics"} by outcome.
      const reads = async () => Object.fromEntries(((await metrics.resultCache.get()).values)
        .filter((v) => v.labels.kind === 'analytics').map((v) => [String(v.labels.outcome), v.value]))
      const before = await reads()
      try {
        expect(await groups()).toEqual([['dev', 1], ['prod', 1]])
        expect(await groups()).toEqual([['dev', 1], ['prod', 1]])
        expect(aggregates).toBe(1)
        expect(await groups({ 'cache-control': 'no-cache' })).toEqual([['dev', 1], ['prod', 1]])
        expect(aggregates).toBe(2)
        const after = await reads()
        expect(['miss', 'hit', 'fresh'].map((o) => (after[o] ?? 0) - (before[o] ?? 0))).toEqual([1, 1, 1])
        expect((await t.request('POST', '/api/v1/assets', { body: server('an-3', 'prod') })).status).toBe(201)
        // On PostgreSQL the relay's notification of that write reaches this app too (it is how
        // other processes hear of it) and would start one more generation later: let it arrive.
        await t.settled()
        expect(await groups()).toEqual([['dev', 1], ['prod', 2]])
        expect(aggregates).toBe(3)
        // A dry run writes nothing: the answer stands.
        expect((await t.request('POST', '/api/v1/assets?dry_run=true', { body: server('an-4', 'dev') })).status).toBe(200)
        expect(await groups()).toEqual([['dev', 1], ['prod', 2]])
        expect(aggregates).toBe(3)
        // Another key's scope is another statement: that key's answer is computed for it.
        const apps = await t.givenKey({ type: 'Admin', roles: ['it_editor'] })
        const scoped = await t.request('POST', '/api/v1/analytics/assets', { body, key: apps })
        expect(scoped.status).toBe(200)
        expect(aggregates).toBe(4)
      } finally {
        t.store.db.onQuery = null
      }
    })

    it('counts relationships again after a relationship is created or deleted', async () => {
      const apps = await t.request('POST', '/api/v1/bulk/assets', { body: [0, 1, 2].map((i) => ({ asset_type_key: 'application', name: `r-${i}`, properties: { code: `r-${i}` } })) })
      const [x, y, z] = apps.body.data.map((d: { id: string }) => d.id)
      const rel = (source: string, target: string) => ({ relationship_type_key: 'depends_on', source_asset_id: source, target_asset_id: target })
      expect((await t.request('POST', '/api/v1/relationships', { body: rel(x, y) })).status).toBe(201)
      const body = { filter: { field: 'relationship_type_key', operator: 'equals', value: 'depends_on' }, page: { size: 1 } }
      const total = async () => (await t.request('POST', '/api/v1/search/relationships', { body })).body.meta.page.total_items
      expect(await total()).toBe(1)
      const second = await t.request('POST', '/api/v1/relationships', { body: rel(y, z) })
      expect(second.status).toBe(201)
      expect(await total()).toBe(2)
      expect((await t.request('DELETE', `/api/v1/relationships/${second.body.data.id}`)).status).toBe(204)
      expect(await total()).toBe(1)
    })

    // PGlite belongs to one process: only PostgreSQL has other server processes.
    if (store === 'postgres') it('answers a write of another server process on the same PostgreSQL at once, counts and analytics', async () => {
      const analytics = { group_by: ['properties.environment'], filter: { field: 'name', operator: 'starts_with', value: 'p-' } }
      const prod = async () => {
        const res = await t.request('POST', '/api/v1/analytics/assets', { body: analytics })
        expect(res.status).toBe(200)
        return res.body.data.find((row: { group: Record<string, string> }) => row.group['properties.environment'] === 'prod')?.measures.count as number
      }
      // At least two matches: a full page of one, so the total is counted (and remembered).
      expect((await t.request('POST', '/api/v1/bulk/assets', { body: [server('p-1', 'prod'), server('p-2', 'prod')] })).status).toBe(201)
      await t.settled()
      // Started once this process's relay has stamped the bulk's events: a relay of the other
      // process racing for them would tell this one of the change after the counts below.
      const other = await startServerProcess({ DATABASE_URL: process.env.TEST_DATABASE_URL, KBIS_TEST_SCHEMA: t.store.schema!, KBIS_EVENT_RELAY_INTERVAL_MS: '20' })
      try {
        countingStatements()
        const before = await searched()
        expect(before).toBeGreaterThanOrEqual(2)
        expect(await prod()).toBe(2)
        // Asked again: both answered from memory, no statement.
        expect([await searched(), await prod()]).toEqual([before, 2])
        expect(counts).toBe(1)
        const res = await fetch(`${other.address}/api/v1/assets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(server('p-other-process', 'prod')),
        })
        expect(res.status).toBe(201)
        // No waiting for a notification: the store's data version has moved (or its events wait
        // for their positions), so nothing remembered is answered.
        expect([await searched(), await prod()]).toEqual([before + 1, 3])
      } finally {
        t.store.db.onQuery = null
        await other.stop()
      }
    }, 90_000)
  })
}
