import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/core/config.js'
import { DEFAULT_PG_PARALLEL_SETUP_COST, openDb, type Db } from '../../src/store/db.js'
import { STORES } from '../helpers/stores.js'
import { postgresSchema } from '../helpers/cli-server.js'
import { openStore } from '../../src/open-store.js'

/**
 * The service's PostgreSQL connections tell the planner what a parallel plan costs to start
 * (decision 0019): a scan of a few hundred thousand rows runs alone instead of waiting for
 * workers to launch.
 */
describe('KBIS_PG_PARALLEL_SETUP_COST', () => {
  it('defaults to 6500; `server` keeps the server\'s setting; anything else must be a cost', () => {
    expect(DEFAULT_PG_PARALLEL_SETUP_COST).toBe(6500)
    expect(loadConfig({}).pgParallelSetupCost).toBe(6500)
    expect(loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: '0' }).pgParallelSetupCost).toBe(0)
    expect(loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: '20000' }).pgParallelSetupCost).toBe(20_000)
    expect(loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: 'server' }).pgParallelSetupCost).toBeUndefined()
    for (const bad of ['-1', '2000000000', 'fast', '12.5']) {
      expect(() => loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: bad }), bad).toThrow(ConfigError)
      expect(() => loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: bad }), bad).toThrow(/KBIS_PG_PARALLEL_SETUP_COST/)
    }
    // The refusal names every value the setting takes, `server` included.
    expect(() => loadConfig({ KBIS_PG_PARALLEL_SETUP_COST: 'cheap' })).toThrow(new ConfigError('KBIS_PG_PARALLEL_SETUP_COST: must be an integer from 0 to 1000000000 or "server" (the server\'s own setting), got "cheap"'))
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: parallel_setup_cost of the pooled connections', () => {
  // The URL carries `options` (search_path), as an operator's may: the setting must survive it.
  let pg: Awaited<ReturnType<typeof postgresSchema>>
  let service: Db
  let server: Db
  let serverCost = ''
  const rows = 200_000

  beforeAll(async () => {
    pg = await postgresSchema()
    // As `kbis serve` opens it: the configuration's default, through openStore (which migrates).
    service = await openStore(loadConfig({ DATABASE_URL: pg.url, KBIS_POOL_SIZE: '3' }))
    server = await openDb({ databaseUrl: pg.url, poolSize: 1 })
    serverCost = (await server.query<{ parallel_setup_cost: string }>('SHOW parallel_setup_cost')).rows[0]!.parallel_setup_cost
    // About the shape of a 200,000-asset projection: ≈ 4,000 pages of 200,000 rows.
    await server.query(`CREATE TABLE scan_me AS SELECT g AS id, md5(g::text) AS a, md5((g * 7)::text) AS b, g % 3 AS env
      FROM generate_series(1, ${rows}) g`)
    await server.query('VACUUM ANALYZE scan_me')
  }, 120_000)
  afterAll(async () => {
    await service?.close()
    await server?.close()
    await pg?.drop()
  })

  it('sets it on every connection of the pool, the URL\'s options notwithstanding', async () => {
    expect(serverCost).not.toBe('6500')
    const seen = await Promise.all(Array.from({ length: 6 }, () => service.transaction(async (tx) => {
      const { rows: [row] } = await tx.query<{ cost: string; path: string; pid: number }>(
        "SELECT current_setting('parallel_setup_cost') AS cost, current_setting('search_path') AS path, pg_backend_pid() AS pid, pg_sleep(0.05) IS NULL AS slept")
      return row!
    })))
    expect(new Set(seen.map((r) => r.pid)).size).toBe(3)
    for (const row of seen) expect(row).toMatchObject({ cost: '6500', path: pg.schema })
  })

  it('keeps the server\'s own setting with KBIS_PG_PARALLEL_SETUP_COST=server', async () => {
    const kept = await openStore(loadConfig({ DATABASE_URL: pg.url, KBIS_POOL_SIZE: '1', KBIS_PG_PARALLEL_SETUP_COST: 'server' }))
    try {
      const { rows: [row] } = await kept.query<{ cost: string; configured: string }>(
        "SELECT current_setting('parallel_setup_cost') AS cost, (SELECT reset_val FROM pg_settings WHERE name = 'parallel_setup_cost') AS configured")
      expect(row!.cost).toBe(row!.configured)
      expect(row!.cost).toBe(serverCost)
    } finally {
      await kept.close()
    }
  })

  it('plans a group-by over 200,000 rows without workers, where PostgreSQL\'s default cost launches them', async () => {
    const groupBy = 'EXPLAIN (FORMAT JSON) SELECT env, count(*), count(a) FROM scan_me GROUP BY env'
    const planOn = (db: Db, cost?: number) => db.transaction(async (tx) => {
      if (cost !== undefined) await tx.query(`SET LOCAL parallel_setup_cost = ${cost}`)
      return JSON.stringify((await tx.query(groupBy)).rows[0])
    })
    expect(await planOn(server, 1000)).toMatch(/"Node Type":"Gather/)
    expect(await planOn(service)).not.toMatch(/"Node Type":"Gather/)
    expect(await planOn(service)).toMatch(/"Node Type":"Seq Scan"/)
  })
})
