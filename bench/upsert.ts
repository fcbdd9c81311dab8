/**
 * PUT /bulk/assets (upsert by composite key, CONTRACT §16) of 10,000 servers beside raw SQL doing
 * the least the same outcome needs, in the same run: unchanged items against one SELECT of those
 * rows (an unchanged upsert writes nothing, so a read is its yardstick), changed items against
 * one UPDATE replacing their properties. BENCH_UPSERT_ITEMS sets a smaller size for a quick try.
 */
import pg from 'pg'
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { expectStatus, type Api } from './lib/http.js'
import { serverBatch, serverChange, type ServerItem } from './lib/data.js'
import { insertAssetsSql } from './lib/raw.js'
import { median, timed } from './lib/stats.js'
import { QUICK, runs } from './lib/config.js'

const RUNS = runs(5)
const ITEMS = Number(process.env.BENCH_UPSERT_ITEMS || (QUICK ? 2_000 : 10_000))

const lit = (value: string): string => pg.escapeLiteral(value)
const keyOf = (item: Pick<ServerItem, 'properties'>): string => `server:hostname:${item.properties.hostname as string}`

/** The PUT body: each item named by its composite key, its values as given. */
function upsertBody(items: readonly ServerItem[]): string {
  return JSON.stringify(items.map(({ asset_type_key: _, ...item }) => ({ ...item, id: keyOf(item) })))
}

/** Run r's values: two properties changed for every item (a new value each run). */
function changed(items: readonly ServerItem[], run: number): ServerItem[] {
  return items.map((item, i) => ({ ...item, properties: { ...item.properties, ...serverChange(run, i) } }))
}

async function timedPut(client: Api, body: string, expected: string): Promise<number> {
  const { ms, result } = await timed(() => client.send('PUT', '/api/v1/bulk/assets', body))
  expectStatus(result, 200, 'PUT /api/v1/bulk/assets')
  const results = (JSON.parse(result.text) as { data: { result: string }[] }).data
  if (results.some((r) => r.result !== expected)) throw new Error(`PUT /bulk/assets: expected every item ${expected}`)
  return ms
}

async function timedSql(client: pg.PoolClient, sql: string): Promise<number> {
  return (await timed(() => client.query(sql))).ms
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  const client = apiFor(ctx, 'bench')
  const orgId = ctx.orgs.bench!.id
  const sql = await ctx.sql.connect()
  try {
    // Ours upserts the servers of batch `ups-o` (created through the API), raw touches batch `ups-r`.
    const ours = serverBatch('ups-o', ITEMS)
    const raw = serverBatch('ups-r', ITEMS)
    expectStatus(await client.send('POST', '/api/v1/bulk/assets', JSON.stringify(ours)), 201, 'POST /api/v1/bulk/assets')
    const { sql: insertRaw, ids: rawIds } = insertAssetsSql(orgId, raw)
    await sql.query(insertRaw)

    const unchangedBody = upsertBody(ours)
    // The cheapest read of those rows: by primary key, one array literal (a multi-row VALUES list
    // of (type, unique value) pairs is planned far worse, and would flatter us).
    const select = `SELECT a.id, a.name, a.access_domain_key, a.properties, a.updated_at FROM assets a
      WHERE a.org_id = ${lit(orgId)} AND a.archived_at IS NULL AND a.id = ANY(${lit(`{${rawIds.join(',')}}`)}::uuid[])`
    const unchanged = { ours: [] as number[], raw: [] as number[] }
    await timedPut(client, unchangedBody, 'unchanged')
    await timedSql(sql, select)
    for (let r = 0; r < RUNS; r++) {
      unchanged.ours.push(await timedPut(client, unchangedBody, 'unchanged'))
      unchanged.raw.push(await timedSql(sql, select))
    }
    ctx.log(`  upsert unchanged runs (ms) ours ${unchanged.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${unchanged.raw.map((m) => m.toFixed(0)).join(', ')}`)

    const update = (run: number) => {
      const values = changed(raw, run).map((item, i) => `(${lit(rawIds[i]!)}::uuid, ${lit(JSON.stringify(item.properties))}::jsonb)`)
      return `UPDATE assets AS a SET properties = v.p, updated_at = date_trunc('second', now())
        FROM (VALUES ${values.join(',\n')}) AS v(id, p) WHERE a.org_id = ${lit(orgId)} AND a.id = v.id`
    }
    const change = { ours: [] as number[], raw: [] as number[] }
    for (let r = 0; r <= RUNS; r++) {
      const body = upsertBody(changed(ours, r))
      const text = update(r)
      const [o, w] = [await timedPut(client, body, 'updated'), await timedSql(sql, text)]
      // Run 0 warms both up.
      if (r > 0) {
        change.ours.push(o)
        change.raw.push(w)
      }
    }
    ctx.log(`  upsert changed runs (ms) ours ${change.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${change.raw.map((m) => m.toFixed(0)).join(', ')}`)
    const size = ITEMS.toLocaleString('en-US')
    return [
      { metric: `PUT /bulk/assets, ${size} unchanged servers (median of ${RUNS})`, ours: median(unchanged.ours), raw: median(unchanged.raw), unit: 'ms',
        target: { on: 'ratio', op: '<=', value: 1.5 },
        note: 'ours: HTTP PUT of the servers as stored, named by composite key, until the answer (every item `unchanged`) is read; raw: one SELECT of the same number of other servers by primary key (`id = ANY(…)`).' },
      { metric: `PUT /bulk/assets, ${size} changed servers (median of ${RUNS})`, ours: median(change.ours), raw: median(change.raw), unit: 'ms',
        target: { on: 'ratio', op: '<=', value: 1.5 },
        note: 'ours: HTTP PUT replacing every server with two properties changed (every item `updated`); raw: one UPDATE … SET properties = v.p FROM (VALUES …) of other servers.' },
    ]
  } finally {
    sql.release()
  }
}
