import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, readFeed, type TestApp } from '../helpers/app.js'
import { PGLITE_STATEMENT_ROWS } from '../../src/store/sql.js'

/*
 * On PGlite a write statement takes at most PGLITE_STATEMENT_ROWS rows (inStatementSlices,
 * store/sql.ts): a bulk of more items is written by the same statement once per slice, in item
 * order, in one transaction. The answers, the events and the rules between items must be those of
 * one statement, on both stores.
 */

/** Items enough for three slices on PGlite. */
const N = 2 * PGLITE_STATEMENT_ROWS + 100
const DATA_WRITES = /^\s*(?:WITH\b[\s\S]*?\b)?(?:INSERT INTO|UPDATE)\s+(?:assets|relationships)\b/i

const server = (hostname: string, item: Record<string, unknown> = {}): Record<string, unknown> => ({
  asset_type_key: 'server', name: hostname, properties: { hostname, environment: 'prod' }, ...item,
})

/** PGlite's WebAssembly memory, in bytes, as its thread reports it (the Db interface does not offer it). */
const wasmMemory = (t: TestApp): Promise<number> => (t.store.db as unknown as { wasmMemoryBytes(): Promise<number> }).wasmMemoryBytes()

/** The columns of `events` but its documents: those the statistics keeper analyzes on PGlite. */
const EVENT_COLUMNS = 'org_id, id, sequence, type, subject, time, request_id, idempotency_key, asset_id, asset_type_key, access_domain_key, related_asset_id, related_asset_type_key, related_access_domain_key, pending_publish'

for (const store of STORES) {
  describe(`${store}: bulks of more items than one PGlite statement takes`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const feed = (cursor: string | null) => readFeed(t, cursor)

    /** The request's answer, and how many statements wrote assets or relationships for it. */
    async function counted(method: string, url: string, body: unknown) {
      let writes = 0
      t.store.db.onQuery = (sql) => void (DATA_WRITES.test(sql) && writes++)
      try {
        return { res: await t.request(method, url, { body }), writes }
      } finally {
        t.store.db.onQuery = null
      }
    }

    const slices = store === 'pglite' ? 3 : 1

    it('creates, updates and relates every item in item order, with one event each in item order', async () => {
      const start = (await feed(null)).cursor
      const items = Array.from({ length: N }, (_, i) => server(`sl-${i}`, { client_ref: `r${i}` }))
      const created = await counted('POST', '/api/v1/bulk/assets', items)
      expect(created.res.status).toBe(201)
      expect(created.writes).toBe(slices)
      const ids: string[] = created.res.body.data.map((d: { id: string }) => d.id)
      expect(created.res.body.data.map((d: { client_ref: string }) => d.client_ref)).toEqual(items.map((i) => i.client_ref))
      expect(new Set(ids).size).toBe(N)
      expect((await t.request('GET', `/api/v1/assets/${ids[N - 1]}`)).body.data.name).toBe(`sl-${N - 1}`)

      // The first and the last item swap their unique values: released first, whatever the slices.
      const changes = ids.map((id, i) => ({ id, properties: { owner: `o${i}` } }))
      changes[0]!.properties = { owner: 'o0', hostname: `sl-${N - 1}` } as never
      changes[N - 1]!.properties = { owner: `o${N - 1}`, hostname: 'sl-0' } as never
      const updated = await counted('PATCH', '/api/v1/bulk/assets', changes)
      expect(updated.res.status).toBe(200)
      expect(updated.writes).toBe(slices + 1)
      expect((await t.request('GET', `/api/v1/assets/server:hostname:sl-0`)).body.data.id).toBe(ids[N - 1])
      expect((await t.request('GET', `/api/v1/assets/server:hostname:sl-${N - 1}`)).body.data).toMatchObject({ id: ids[0], properties: { owner: 'o0' } })

      const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'slices', properties: { code: 'slices' } } })).body.data.id
      const related = await counted('POST', '/api/v1/bulk/relationships', ids.map((id) => ({ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: id })))
      expect(related.res.status).toBe(201)
      expect(related.writes).toBe(slices)
      const links = (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM relationships WHERE source_asset_id = $1', [app])).rows[0]!.n
      expect(links).toBe(N)

      const { events } = await feed(start)
      const of = (type: string) => events.filter((e) => e.type === type && e.data.object.asset_type_key !== 'application')
      expect(of('asset.created').map((e) => e.data.object.id)).toEqual(ids)
      expect(of('asset.updated').map((e) => e.data.object.id)).toEqual(ids)
      expect(of('asset.updated')[0].data.changes).toEqual({
        'properties.hostname': { from: 'sl-0', to: `sl-${N - 1}` }, 'properties.owner': { from: null, to: 'o0' },
      })
      expect(of('relationship.created').map((e) => e.data.object.target_asset_id)).toEqual(ids)
    })

    it('refuses the later of two equal relationships in different slices, and writes none of the bulk', async () => {
      const ids: string[] = (await t.request('POST', '/api/v1/bulk/assets', { body: Array.from({ length: N }, (_, i) => server(`sd-${i}`)) })).body.data.map((d: { id: string }) => d.id)
      const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'dup', properties: { code: 'slices-dup' } } })).body.data.id
      const items = ids.map((id) => ({ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: id }))
      const res = await t.request('POST', '/api/v1/bulk/relationships', { body: [...items, { ...items[0]!, client_ref: 'again' }] })
      expect(res.status).toBe(409)
      expect(res.body.errors).toEqual([{
        status: '409', code: 'duplicate_relationship', detail: 'the same runs_on relationship is given by item 0',
        source: { pointer: `/${N}` }, meta: { index: N, client_ref: 'again' },
      }])
      const links = (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM relationships WHERE source_asset_id = $1', [app])).rows[0]!.n
      expect(links).toBe(0)
    })

    if (store === 'pglite') {
      it('leaves PGlite\'s WebAssembly memory as it was over bulks of 10,000 and the ANALYZE of their events', async () => {
        const before = await wasmMemory(t)
        const created = await t.request('POST', '/api/v1/bulk/assets', { body: Array.from({ length: 10_000 }, (_, i) => server(`wm-${i}`, { properties: { hostname: `wm-${i}`, environment: 'prod', owner: 'team-a', notes: 'x'.repeat(200) } })) })
        expect(created.status).toBe(201)
        const ids: string[] = created.body.data.map((d: { id: string }) => d.id)
        expect((await t.request('PATCH', '/api/v1/bulk/assets', { body: ids.map((id, i) => ({ id, properties: { owner: `o${i}` } })) })).status).toBe(200)
        const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'wm', properties: { code: 'wm' } } })).body.data.id
        expect((await t.request('POST', '/api/v1/bulk/relationships', { body: ids.map((id) => ({ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: id })) })).status).toBe(201)
        // Measured: 10,000 servers in one statement grew it by 26 MB, for good.
        expect(await wasmMemory(t)).toBe(before)

        // Then an ANALYZE of the events, as the statistics keeper runs after such bulks, with those
        // bulks' events (30,000 and more) in the table. ANALYZE copies each sampled row whole,
        // documents included: 30,000 events sampled (the default statistics target, 100) grew the
        // memory by 26 MB. The target of the events' columns is 10 (migration 0018): 3,000 rows.
        const events = (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events')).rows[0]!.n
        expect(events).toBeGreaterThan(30_000)
        await t.store.db.query(`ANALYZE events (${EVENT_COLUMNS})`)
        const sampled = await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stats WHERE tablename = 'events' AND attname = 'type'")
        expect(sampled.rows[0]!.n).toBe(1)
        expect(await wasmMemory(t)).toBe(before)
      })
    }
  })
}
