import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { bulkCreateAssets } from '../helpers/seed.js'
import { ANALYZE_AFTER_ROWS, ANALYZE_DEBOUNCE_MS } from '../../src/store/statistics.js'
import { metrics } from '../../src/ops/metrics.js'

// PGlite has no autovacuum, and PostgreSQL's may be off or a minute behind: the server gathers
// planner statistics itself after large writes (docs/decisions/0002-pglite-statistics.md).
for (const store of STORES) {
  describe(`${store}: planner statistics after large writes`, () => {
    let t: TestApp
    beforeAll(async () => { t = await createTestApp(store) })
    afterAll(async () => t.close())

    const reltuples = async () => {
      const projection = (await t.store.db.query<{ table_name: string }>('SELECT table_name FROM asset_projections WHERE org_id = $1', [t.orgId])).rows[0]!.table_name
      const result = await t.store.db.query<{ assets: number; projection: number }>(
        "SELECT (SELECT reltuples::int FROM pg_class WHERE oid = 'assets'::regclass) AS assets, (SELECT reltuples::int FROM pg_class WHERE oid = $1::regclass) AS projection",
        [`"${projection}"`])
      return result.rows[0]!
    }

    it('runs ANALYZE shortly after a bulk of 1,000 rows, so the planner knows the table and the projection', async () => {
      // kbis_store_upkeep_seconds: one observation per statement of the upkeep, by kind.
      const statements = async () => {
        const { values } = await metrics.storeUpkeep.get()
        const count = (kind: string) => values.find((v) => v.metricName === 'kbis_store_upkeep_seconds_count' && v.labels.kind === kind)?.value ?? 0
        return { vacuum: count('vacuum'), analyze: count('analyze') }
      }
      const before = await statements()
      await bulkCreateAssets(t, 'note', Array.from({ length: ANALYZE_AFTER_ROWS }, (_, i) => ({ name: `n-${i}`, properties: { body: 'x' } })))
      const known = { assets: ANALYZE_AFTER_ROWS, projection: ANALYZE_AFTER_ROWS }
      expect(await reltuples()).not.toEqual(known)
      const deadline = Date.now() + 30_000
      while (JSON.stringify(await reltuples()) !== JSON.stringify(known) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
      expect(await reltuples()).toEqual(known)
      // PGlite, without autovacuum, is vacuumed too: its pages are marked all-visible (index-only
      // scans) and dead row versions are reclaimed; on PostgreSQL that is autovacuum's work.
      const allVisible = await t.store.db.query<{ pages: number }>("SELECT relallvisible::int AS pages FROM pg_class WHERE oid = 'assets'::regclass")
      if (store === 'pglite') expect(allVisible.rows[0]!.pages).toBeGreaterThan(0)
      else expect(allVisible.rows[0]!.pages).toBe(0)
      // PGlite: a VACUUM and an ANALYZE per table written (assets, its projection, events, …);
      // PostgreSQL: one ANALYZE of assets, relationships and the projection, and no VACUUM.
      const enough = (n: { vacuum: number; analyze: number }) => store === 'pglite' ? n.vacuum - before.vacuum >= 3 && n.analyze - before.analyze >= 3 : n.analyze > before.analyze
      while (!enough(await statements()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      const after = await statements()
      if (store === 'pglite') {
        expect(after.vacuum - before.vacuum).toBeGreaterThanOrEqual(3)
        expect(after.analyze - before.analyze).toBeGreaterThanOrEqual(3)
      } else {
        expect(after).toEqual({ vacuum: before.vacuum, analyze: before.analyze + 1 })
      }
    })

    if (store === 'pglite') {
      it('vacuums and analyzes table by table what was written, every column but the JSON documents', async () => {
        const projection = (await t.store.db.query<{ table_name: string }>('SELECT table_name FROM asset_projections WHERE org_id = $1', [t.orgId])).rows[0]!.table_name
        const written = ['assets', 'events', projection]
        // Each table's counters as PGlite's statistics hold them now (the flush is forced: at most once a second otherwise).
        const counters = async () => {
          await t.store.db.query('SELECT pg_stat_force_next_flush()')
          return (await t.store.db.query<{ relname: string; vacuumed: boolean; left: number }>(
            `SELECT relname, last_vacuum IS NOT NULL AS vacuumed, (n_dead_tup + n_ins_since_vacuum)::int AS left
             FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY($1) ORDER BY relname`, [written])).rows
        }
        const columnsWithStatistics = async (table: string) =>
          (await t.store.db.query<{ attname: string }>('SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1 ORDER BY attname', [table])).rows.map((r) => r.attname)
        // An update of every note: dead row versions in assets and its projection, and more events.
        const ids = (await t.store.db.query<{ id: string }>("SELECT id FROM assets WHERE org_id = $1 AND asset_type_key = 'note'", [t.orgId])).rows.map((r) => r.id)
        expect(ids).toHaveLength(ANALYZE_AFTER_ROWS)
        const patched = await t.request('PATCH', '/api/v1/bulk/assets', { body: ids.map((id: string) => ({ id, properties: { body: 'y' } })) })
        expect(patched.status).toBe(200)
        expect((await counters()).every((c) => c.left > 0)).toBe(true)
        const deadline = Date.now() + 30_000
        while ((await columnsWithStatistics('events')).length === 0 || (await counters()).some((c) => c.left > 0)) {
          if (Date.now() > deadline) throw new Error(`not vacuumed and analyzed: ${JSON.stringify(await counters())}`)
          await new Promise((r) => setTimeout(r, 200))
        }
        expect(await counters()).toEqual(written.sort().map((relname) => ({ relname, vacuumed: true, left: 0 })))
        const assets = await columnsWithStatistics('assets')
        expect(assets).toEqual(expect.arrayContaining(['asset_type_key', 'name', 'org_id', 'unique_value']))
        expect(assets).not.toContain('properties')
        const events = await columnsWithStatistics('events')
        expect(events).toEqual(expect.arrayContaining(['org_id', 'sequence', 'type']))
        expect(events).not.toContain('data')
        expect((await columnsWithStatistics(projection)).length).toBeGreaterThan(0)
      })

      it('analyzes again only the tables changed since: relationships written leave the assets as analyzed', async () => {
        const analyzed = async () => Object.fromEntries((await t.store.db.query<{ relname: string; n: number }>(
          "SELECT relname, analyze_count::int AS n FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname IN ('assets', 'events', 'relationships')")).rows.map((r) => [r.relname, r.n]))
        // The keeper's runs are over when no table has been vacuumed or analyzed for a second.
        const settled = async () => {
          const upkeep = async () => (await t.store.db.query<{ n: number }>('SELECT sum(vacuum_count + analyze_count)::int AS n FROM pg_stat_user_tables')).rows[0]!.n
          for (let last = await upkeep(), since = Date.now(); Date.now() - since < 1000; await new Promise((r) => setTimeout(r, 100))) {
            const now = await upkeep()
            if (now !== last) [last, since] = [now, Date.now()]
          }
        }
        await settled()
        const before = await analyzed()
        const ids = (await t.store.db.query<{ id: string }>("SELECT id FROM assets WHERE org_id = $1 AND asset_type_key = 'note' ORDER BY id", [t.orgId])).rows.map((r) => r.id)
        const created = await t.request('POST', '/api/v1/bulk/relationships', {
          body: ids.map((id, i) => ({ relationship_type_key: 'depends_on', source_asset_id: id, target_asset_id: ids[(i + 1) % ids.length] })),
        })
        expect(created.status).toBe(201)
        const deadline = Date.now() + 30_000
        while ((await analyzed()).relationships === before.relationships || (await analyzed()).events === before.events) {
          if (Date.now() > deadline) throw new Error(`not analyzed: ${JSON.stringify(await analyzed())}`)
          await new Promise((r) => setTimeout(r, 200))
        }
        await settled()
        expect(await analyzed()).toEqual({ assets: before.assets, events: before.events! + 1, relationships: before.relationships! + 1 })
      })
    }
  })

  describe(`${store}: what is not a write for the statistics`, () => {
    let t: TestApp
    beforeAll(async () => { t = await createTestApp(store) })
    afterAll(async () => t.close())

    it('counts neither dry runs nor replayed answers, however many items they hold', async () => {
      // Only the server's own ANALYZE may count here (PostgreSQL's autovacuum is another).
      if (store === 'postgres') await t.store.db.query('ALTER TABLE assets SET (autovacuum_enabled = false)')
      const items = Array.from({ length: ANALYZE_AFTER_ROWS }, (_, i) => ({ asset_type_key: 'note', name: `dry-${i}` }))
      const dry = await t.request('POST', '/api/v1/bulk/assets?dry_run=true', { body: items })
      expect(dry.status).toBe(200)
      expect(dry.body.meta).toEqual({ dry_run: true, items: ANALYZE_AFTER_ROWS })
      // A small write, answered, then replayed with its Idempotency-Key as often as the threshold.
      const first = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'once' }, headers: { 'idempotency-key': 'stats-once' } })
      expect(first.status).toBe(201)
      for (let i = 0; i < 3; i++) {
        const again = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'once' }, headers: { 'idempotency-key': 'stats-once' } })
        expect(again.headers['idempotent-replayed']).toBe('true')
      }
      await new Promise((resolve) => setTimeout(resolve, ANALYZE_DEBOUNCE_MS + 1500))
      // Never analyzed: the planner's row count is still unknown (-1), not the 1 asset stored.
      const rows = await t.store.db.query<{ n: number }>("SELECT reltuples::int AS n FROM pg_class WHERE oid = 'assets'::regclass")
      expect(rows.rows[0]!.n).toBe(-1)
    })
  })
}
