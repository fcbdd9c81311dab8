import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { bulkCreateAssets } from '../helpers/seed.js'
import { ANALYZE_AFTER_ROWS } from '../../src/store/statistics.js'

// PGlite has no autovacuum: the server gathers planner statistics itself after large writes
// (docs/decisions/0002-pglite-statistics.md). PostgreSQL's own daemon does it there.
for (const store of STORES.filter((s) => s === 'pglite')) {
  describe(`${store}: planner statistics after large writes`, () => {
    let t: TestApp
    beforeAll(async () => { t = await createTestApp(store) })
    afterAll(async () => t.close())

    const reltuples = async () =>
      (await t.store.db.query<{ n: number }>("SELECT reltuples::int AS n FROM pg_class WHERE oid = 'assets'::regclass")).rows[0]!.n

    it('runs ANALYZE shortly after a bulk of 1,000 rows, so the planner knows the table', async () => {
      await bulkCreateAssets(t, 'note', Array.from({ length: ANALYZE_AFTER_ROWS }, (_, i) => ({ name: `n-${i}`, properties: { body: 'x' } })))
      expect(await reltuples()).not.toBe(ANALYZE_AFTER_ROWS)
      const deadline = Date.now() + 30_000
      while ((await reltuples()) !== ANALYZE_AFTER_ROWS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
      expect(await reltuples()).toBe(ANALYZE_AFTER_ROWS)
    })
  })
}
