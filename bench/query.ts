/**
 * Search and analytics over 200,000 servers (issue 4): for each benchmark query, the median
 * latency through the HTTP API beside the same query as hand-written SQL through pg over the
 * storage the service reads (the typed projection), and for the aggregates the same SQL over a
 * plain typed-column table the bench creates, and over the jsonb documents, for scale.
 *   (a) search (environment = prod AND cpu_count >= 16) OR (tags includes pci AND name starts_with db-),
 *       sorted by name, page size 50 (page and total);
 *   (b) count + average(memory_gb) grouped by environment;
 *   (c) count_distinct(owner).
 * Also: what the projection adds to a raw 10,000-row INSERT into `assets`.
 * The hand-written SQL runs on connections with the service's planner setting (ownSql).
 */
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { expectStatus, FRESH } from './lib/http.js'
import { insertAssetsSql } from './lib/raw.js'
import { SEARCH_FILTER, serverBatch } from './lib/data.js'
import { seedServers } from './lib/seed.js'
import { median, timed } from './lib/stats.js'
import { fmtCount, QUICK, runs, runs as runsOf, SIZE } from './lib/config.js'
import { loadConfig } from '../src/core/config.js'
import { openDb, type Db } from '../src/store/db.js'

const ASSETS = SIZE
const WARMUP = QUICK ? 1 : 3
const RUNS = runs(20, 3)

type Timer = () => Promise<number>

/** Median of RUNS timings of each, after WARMUP untimed ones; the timers take turns. */
async function medians(timers: readonly Timer[]): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) for (const t of timers) await t()
  const runs = timers.map(() => [] as number[])
  for (let i = 0; i < RUNS; i++) for (const [j, t] of timers.entries()) runs[j]!.push(await t())
  return runs.map(median)
}

interface Queries {
  api: { path: string; body: string; check(body: any): void }
  /** Hand-written statements over the projection `P` (run side by side, as the service does). */
  projection: string[]
  /** The same over the bench's typed table `T`, and over the jsonb documents; aggregates only. */
  typed?: string
  jsonb?: string
}

function queries(table: string, search: { total: number }): Record<'a' | 'b' | 'c', Queries> {
  const P = `"${table}"`
  const aWhere = `p.org_id = $1 AND ((p.t_environment = 'prod' AND p.n_cpu_count >= 16) OR (p.m_tags @> '{pci}'::text[] AND p.name ILIKE 'db-%'))`
  return {
    a: {
      api: {
        // The raw side counts every match, so the API is asked for the exact count too (beyond
        // 10,000 it would otherwise answer a capped one, CONTRACT §1).
        path: '/api/v1/search/assets',
        body: JSON.stringify({ filter: SEARCH_FILTER, sort: [{ field: 'name', order: 'asc' }], page: { number: 1, size: 50, count: 'exact' } }),
        check: (body) => {
          if (body.data.length !== 50 || body.meta.page.total_items !== search.total) throw new Error(`bench: (a) answered ${body.data.length} rows of ${body.meta.page.total_items}, expected 50 of ${search.total}`)
        },
      },
      projection: [
        `SELECT a.id, a.asset_type_key, a.name, a.access_domain_key, a.properties, a.created_at, a.updated_at
         FROM ${P} p JOIN assets a ON a.org_id = p.org_id AND a.id = p.id WHERE ${aWhere} ORDER BY p.name, p.id LIMIT 50`,
        `SELECT count(*)::int AS n FROM ${P} p WHERE ${aWhere}`,
      ],
    },
    b: {
      api: {
        path: '/api/v1/analytics/assets',
        body: JSON.stringify({ measures: [{ type: 'count' }, { type: 'average', field: 'properties.memory_gb' }], group_by: ['properties.environment'] }),
        check: (body) => { if (body.data.length !== 3) throw new Error(`bench: (b) answered ${body.data.length} groups`) },
      },
      projection: [`SELECT p.t_environment, count(*), avg(p.n_memory_gb) FROM ${P} p WHERE p.org_id = $1 GROUP BY p.t_environment ORDER BY p.t_environment`],
      typed: 'SELECT t.environment, count(*), avg(t.memory_gb) FROM bench_typed_servers t WHERE t.org_id = $1 GROUP BY t.environment ORDER BY t.environment',
      jsonb: `SELECT a.properties->>'environment', count(*), avg((a.properties->>'memory_gb')::numeric) FROM assets a
              WHERE a.org_id = $1 AND a.archived_at IS NULL GROUP BY 1 ORDER BY 1`,
    },
    c: {
      api: {
        path: '/api/v1/analytics/assets',
        body: JSON.stringify({ measures: [{ type: 'count_distinct', field: 'properties.owner' }] }),
        check: (body) => { if (body.data[0].measures['count_distinct:properties.owner'] !== 7) throw new Error('bench: (c) did not count 7 owners') },
      },
      // count(DISTINCT x) sorts every row; one row per value first hashes (see docs/indexes-and-plans.md).
      projection: [`SELECT count(s.x) FROM (SELECT p.t_owner AS x FROM ${P} p WHERE p.org_id = $1 GROUP BY p.t_owner) s`],
      typed: 'SELECT count(s.x) FROM (SELECT t.owner AS x FROM bench_typed_servers t WHERE t.org_id = $1 GROUP BY t.owner) s',
      jsonb: `SELECT count(s.x) FROM (SELECT a.properties->>'owner' AS x FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL GROUP BY 1) s`,
    },
  }
}

/**
 * A plain table with one typed column per field of the servers (system columns and every
 * property of the type), as a hand-built schema or a typed-column CMS would hold the same data.
 */
async function createTypedTable(ctx: BenchContext, orgId: string): Promise<void> {
  await ctx.sql.query(`CREATE TABLE bench_typed_servers AS
    SELECT a.org_id, a.id, a.asset_type_key, a.name, a.access_domain_key, a.created_at, a.updated_at,
           a.properties->>'hostname' AS hostname, a.properties->>'environment' AS environment,
           (a.properties->>'cpu_count')::int AS cpu_count, (a.properties->>'memory_gb')::numeric AS memory_gb,
           (a.properties->>'purchased_on')::date AS purchased_on, ARRAY(SELECT jsonb_array_elements_text(a.properties->'tags')) AS tags,
           a.properties->>'owner' AS owner, (a.properties->>'cost')::numeric AS cost, a.properties->>'notes' AS notes
    FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL AND a.asset_type_key = 'server'`, [orgId])
  await ctx.sql.query('ALTER TABLE bench_typed_servers ADD PRIMARY KEY (org_id, id)')
  await ctx.sql.query('VACUUM ANALYZE bench_typed_servers')
}

async function projectionTable(ctx: BenchContext, orgId: string): Promise<string> {
  const { rows } = await ctx.sql.query<{ table_name: string }>('SELECT table_name FROM asset_projections WHERE org_id = $1', [orgId])
  if (!rows[0]) throw new Error('bench: the organization has no projection')
  // As autovacuum would have by now on a live system: statistics and the visibility map.
  await ctx.sql.query(`VACUUM ANALYZE "${rows[0].table_name}"`)
  return rows[0].table_name
}

/**
 * Connections for the hand-written SQL of this module, with the planner setting the service's own
 * connections carry (`KBIS_PG_PARALLEL_SETUP_COST`, decision 0019): "the same SQL" then runs the
 * same plan, so the API's ratio is its own overhead, and the typed-table and jsonb statements it
 * is compared with are planned alike.
 */
function ownSql(ctx: BenchContext): Promise<Db> {
  return openDb({ databaseUrl: ctx.databaseUrl, schema: ctx.schema, poolSize: 2, parallelSetupCost: loadConfig(process.env).pgParallelSetupCost })
}

function timers(ctx: BenchContext, own: Db, orgId: string, q: Queries): { api: Timer; projection: Timer; typed?: Timer; jsonb?: Timer } {
  const client = apiFor(ctx, 'pages')
  const sql = (text: string): Timer => async () => (await timed(() => own.query(text, [orgId]))).ms
  const projection: Timer = async () => (await timed(() => Promise.all(q.projection.map((text) => own.query(text, [orgId]))))).ms
  const api: Timer = async () => {
    // Fresh: the SQL side computes every time, so the service does too (no remembered count or answer).
    const { ms, result } = await timed(() => client.send('POST', q.api.path, q.api.body, FRESH))
    expectStatus(result, 200, `POST ${q.api.path}`)
    q.api.check(JSON.parse(result.text))
    return ms
  }
  return { api, projection, ...(q.typed ? { typed: sql(q.typed) } : {}), ...(q.jsonb ? { jsonb: sql(q.jsonb) } : {}) }
}

/**
 * A raw 10,000-row INSERT into `assets`, with the projection trigger and without, each in a
 * transaction rolled back: 1 warm-up and 5 runs of each, taking turns.
 */
async function projectionWriteCost(ctx: BenchContext, orgId: string): Promise<{ with: number; without: number }> {
  let batch = 0
  const once = async (enabled: boolean): Promise<number> => {
    const { sql } = insertAssetsSql(orgId, serverBatch(`projection-cost-${batch++}`))
    const client = await ctx.sql.connect()
    try {
      await client.query('BEGIN')
      if (!enabled) await client.query('ALTER TABLE assets DISABLE TRIGGER assets_project_insert')
      return (await timed(() => client.query(sql))).ms
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  }
  await once(true)
  await once(false)
  const runs = { with: [] as number[], without: [] as number[] }
  for (let i = 0; i < runsOf(5, 1); i++) {
    runs.with.push(await once(true))
    runs.without.push(await once(false))
  }
  return { with: median(runs.with), without: median(runs.without) }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  await seedServers(ctx, 'pages', ASSETS)
  const orgId = ctx.orgs.pages!.id
  const table = await projectionTable(ctx, orgId)
  await createTypedTable(ctx, orgId)
  const total = (await ctx.sql.query<{ n: number }>(queries(table, { total: 0 }).a.projection[1]!, [orgId])).rows[0]!.n
  const q = queries(table, { total })
  const rows: Row[] = []
  const own = await ownSql(ctx)
  try {
    const a = timers(ctx, own, orgId, q.a)
    const [aApi, aSql] = await medians([a.api, a.projection])
    rows.push({ metric: `(a) POST /search/assets, nested filter, sort=name, size 50 (${fmtCount(ASSETS)} servers)`, ours: aApi!, raw: aSql!, unit: 'ms', target: { on: 'ratio', op: '<=', value: 1.5 },
      note: `(a) ${total} matches. raw: the page SELECT (joined back to assets for the documents) and the count, side by side through pg over the typed projection, as the service runs them (on connections with its parallel_setup_cost, decision 0019); the API is asked with Cache-Control: no-cache, so it counts every time too; median of ${RUNS} after ${WARMUP} warm-ups, taking turns.` })
    for (const [name, label] of [['b', '(b) count + average(memory_gb) by environment'], ['c', '(c) count_distinct(owner)']] as const) {
      const t = timers(ctx, own, orgId, q[name])
      // Pairs alternate in their own loops: a heavy neighbour (the jsonb query spills its sort to
      // disk) must not run just before one side of a pair every time.
      const [api, projection] = await medians([t.api, t.projection])
      const [projectionAgain, typed] = await medians([t.projection, t.typed!])
      const [jsonb] = await medians([t.jsonb!])
      rows.push(
        { metric: `${label}: POST /analytics/assets vs the same SQL`, ours: api!, raw: projection!, unit: 'ms', target: { on: 'ratio', op: '<=', value: 1.5 },
          note: `${label}: raw is the hand-written SQL over the typed projection the service reads, on connections with its parallel_setup_cost (decision 0019), as are the typed-table and jsonb statements; the API is asked with Cache-Control: no-cache (no remembered answer); median of ${RUNS} after ${WARMUP} warm-ups.` },
        { metric: `${label}: SQL over the projection vs a plain typed-column table`, ours: projectionAgain!, raw: typed!, unit: 'ms', target: { on: 'ratio', op: '<=', value: 1.5 },
          note: `${label}, typed table: bench_typed_servers, created by the bench from the same servers, one typed column per field (text, int, numeric, date, text[]), same SQL shape.` },
        { metric: `${label}: the same SQL over the jsonb documents (for scale)`, ours: jsonb!, raw: typed!, unit: 'ms' },
      )
    }
  } finally {
    await own.close()
  }
  const write = await projectionWriteCost(ctx, orgId)
  rows.push({ metric: 'raw INSERT of 10,000 servers into assets: with the projection trigger vs without', ours: write.with, raw: write.without, unit: 'ms',
    note: 'projection write cost: one multi-row INSERT … VALUES through pg, in a transaction rolled back, with the statement trigger that fills the typed projection and with it disabled.' })
  await ctx.sql.query('DROP TABLE bench_typed_servers')
  return rows
}
