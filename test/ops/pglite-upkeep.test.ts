import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestStore, type TestStore } from '../helpers/stores.js'
import { StatisticsKeeper, type UpkeepKind } from '../../src/store/statistics.js'

// The keeper's upkeep on PGlite (decision 0002): one statement per table, each step on its own,
// so that a table gone since the list fails its own steps only.
describe('pglite: the statistics keeper’s upkeep, table by table', () => {
  let store: TestStore
  beforeAll(async () => {
    store = await createTestStore('pglite')
    for (const table of ['upkeep_a', 'upkeep_doomed', 'upkeep_z']) {
      await store.db.query(`CREATE TABLE ${table} (id int PRIMARY KEY, doc jsonb NOT NULL DEFAULT '{}')`)
      await store.db.query(`INSERT INTO ${table} (id) SELECT generate_series(1, 500)`)
    }
    await store.db.query('UPDATE upkeep_z SET doc = \'{"x": 1}\' WHERE id <= 100')
  })
  afterAll(async () => store.drop())

  it('goes on after a table dropped meanwhile, vacuums and analyzes the others, and skips their documents', async () => {
    const errors: string[] = []
    const steps: UpkeepKind[] = []
    const keeper = new StatisticsKeeper(store.db, {
      onError: (err) => errors.push(String((err as Error).message)),
      onStatement: (kind) => {
        // Right after the first statement, the middle table goes (the drop queues before the keeper's next statement).
        if (steps.push(kind) === 1) void store.db.query('DROP TABLE upkeep_doomed')
      },
    })
    await keeper.analyze()
    // Its VACUUM and its ANALYZE failed, each on its own; every other step ran.
    expect(errors).toEqual([expect.stringMatching(/upkeep_doomed.*does not exist/), expect.stringMatching(/upkeep_doomed.*does not exist/)])
    expect(steps.filter((k) => k === 'vacuum').length).toBeGreaterThanOrEqual(2)
    expect(steps.filter((k) => k === 'analyze').length).toBeGreaterThanOrEqual(2)
    await store.db.query('SELECT pg_stat_force_next_flush()')
    const tables = await store.db.query<{ relname: string; dead: number; vacuumed: boolean; analyzed: boolean }>(
      `SELECT relname, n_dead_tup::int AS dead, last_vacuum IS NOT NULL AS vacuumed, last_analyze IS NOT NULL AS analyzed
       FROM pg_stat_user_tables WHERE relname LIKE 'upkeep_%' ORDER BY relname`)
    expect(tables.rows).toEqual([
      { relname: 'upkeep_a', dead: 0, vacuumed: true, analyzed: true },
      { relname: 'upkeep_z', dead: 0, vacuumed: true, analyzed: true },
    ])
    const columns = await store.db.query<{ tablename: string; attname: string }>(
      "SELECT tablename, attname FROM pg_stats WHERE tablename LIKE 'upkeep_%' ORDER BY tablename, attname")
    expect(columns.rows).toEqual([{ tablename: 'upkeep_a', attname: 'id' }, { tablename: 'upkeep_z', attname: 'id' }])

    // A failed ANALYZE is not taken as done: the table made again under the same name, with as
    // many changes as the one that failed, is analyzed by the next upkeep.
    await store.db.query(`CREATE TABLE upkeep_doomed (id int PRIMARY KEY, doc jsonb NOT NULL DEFAULT '{}')`)
    await store.db.query('INSERT INTO upkeep_doomed (id) SELECT generate_series(1, 500)')
    errors.length = 0
    await keeper.analyze()
    await keeper.close()
    expect(errors).toEqual([])
    const again = await store.db.query<{ tablename: string; attname: string }>(
      "SELECT tablename, attname FROM pg_stats WHERE tablename LIKE 'upkeep_%' ORDER BY tablename, attname")
    expect(again.rows).toEqual([{ tablename: 'upkeep_a', attname: 'id' }, { tablename: 'upkeep_doomed', attname: 'id' }, { tablename: 'upkeep_z', attname: 'id' }])
  })
})
