/**
 * Bulk writes of 10,000 items through the API beside the same rows written by one raw SQL
 * statement, in the same run, on the same table: create, update (2 properties), relationships;
 * the service's peak RSS over those runs; and the bulk create on PGlite (ours only).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type pg from 'pg'
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { api, timedBulk, type Api } from './lib/http.js'
import { benchSetup, serverBatch, serverChange } from './lib/data.js'
import { insertAssetsSql, insertRelationshipsSql, updateAssetsSql } from './lib/raw.js'
import { startService } from './lib/service.js'
import { runs } from './lib/config.js'
import { alternate, median, timed, type Pair } from './lib/stats.js'

const RUNS = runs(5)

async function timedSql(client: pg.PoolClient, sql: string): Promise<number> {
  return (await timed(() => client.query(sql))).ms
}

interface Created {
  pair: Pair
  ours: string[][]
  raw: string[][]
}

async function bulkCreate(client: Api, sql: pg.PoolClient, orgId: string): Promise<Created> {
  const created: Created = { pair: { ours: [], raw: [] }, ours: [], raw: [] }
  const ours = async (batch: string) => {
    const res = await timedBulk(client, 'POST', '/api/v1/bulk/assets', JSON.stringify(serverBatch(batch)), 201)
    created.ours.push(res.ids)
    return res.ms
  }
  const raw = async (batch: string) => {
    const { sql: text, ids } = insertAssetsSql(orgId, serverBatch(batch))
    created.raw.push(ids)
    return timedSql(sql, text)
  }
  await ours('warm-o')
  await raw('warm-r')
  created.pair = await alternate(RUNS, (r) => ours(`o${r}`), (r) => raw(`r${r}`))
  return created
}

/** Run r rewrites two properties of the same 10,000 servers (ours: batch o1, raw: batch r1). */
async function bulkUpdate(client: Api, sql: pg.PoolClient, orgId: string, created: Created): Promise<Pair> {
  const [oursIds, rawIds] = [created.ours[1]!, created.raw[1]!]
  const ours = async (r: number) => {
    const body = JSON.stringify(oursIds.map((id, i) => ({ id, properties: serverChange(r, i) })))
    return (await timedBulk(client, 'PATCH', '/api/v1/bulk/assets', body, 200)).ms
  }
  const raw = (r: number) => timedSql(sql, updateAssetsSql(orgId, rawIds.map((id, i) => ({ id, properties: serverChange(r, i) }))))
  await ours(RUNS)
  await raw(RUNS)
  return alternate(RUNS, ours, raw)
}

/** Run r links a fresh application to the 10,000 servers of batch o2 (new pairs every run). */
async function bulkRelationships(client: Api, sql: pg.PoolClient, orgId: string, created: Created): Promise<Pair> {
  const apps = Array.from({ length: 2 * RUNS + 2 }, (_, i) => ({ asset_type_key: 'application', name: `app-${i}`, properties: { code: `app-${i}` } }))
  const appIds = (await timedBulk(client, 'POST', '/api/v1/bulk/assets', JSON.stringify(apps), 201)).ids
  const targets = created.ours[2]!
  const ours = async (r: number) => {
    const body = JSON.stringify(targets.map((id, i) => ({ relationship_type_key: 'runs_on', source_asset_id: appIds[2 * r]!, target_asset_id: id, client_ref: `rel-${i}` })))
    return (await timedBulk(client, 'POST', '/api/v1/bulk/relationships', body, 201)).ms
  }
  const raw = (r: number) => timedSql(sql, insertRelationshipsSql(orgId, 'runs_on', targets.map((id) => ({ source: appIds[2 * r + 1]!, target: id }))))
  await ours(RUNS)
  await raw(RUNS)
  return alternate(RUNS, ours, raw)
}

/**
 * The same bulk create against a service on embedded PGlite, ours only. On a data directory, as
 * `kbis serve` runs it: PGlite's in-memory file system (memory://) grows its files by copying
 * and is much slower for large writes than any deployment.
 */
async function pgliteCreate(ctx: BenchContext): Promise<{ ms: number[]; rss: number }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'kbis-bench-pglite-bulk-'))
  const setups = path.join(dir, 'setups.json')
  writeFileSync(setups, JSON.stringify([benchSetup('bench')]))
  const service = await startService('serve.ts', { BENCH_STORE: 'pglite', BENCH_PGLITE_DIR: path.join(dir, 'data'), BENCH_SETUPS: setups })
  try {
    const client = api(service.url, (service.ready.orgs as Record<string, { secret: string }>).bench!.secret)
    await timedBulk(client, 'POST', '/api/v1/bulk/assets', JSON.stringify(serverBatch('warm')), 201)
    const ms: number[] = []
    for (let r = 0; r < RUNS; r++) ms.push((await timedBulk(client, 'POST', '/api/v1/bulk/assets', JSON.stringify(serverBatch(`p${r}`)), 201)).ms)
    ctx.log(`  PGlite bulk create runs (ms): ${ms.map((m) => m.toFixed(0)).join(', ')}`)
    return { ms, rss: service.peakRssMb() }
  } finally {
    await service.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

function row(metric: string, pair: Pair, note: string): Row {
  return { metric, ours: median(pair.ours), raw: median(pair.raw), unit: 'ms', target: { on: 'ratio', op: '<=', value: 1.5 }, note }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  const client = apiFor(ctx, 'bench')
  const orgId = ctx.orgs.bench!.id
  const sql = await ctx.sql.connect()
  try {
    const idle = ctx.service.peakRssMb()
    ctx.service.resetPeakRss()
    const created = await bulkCreate(client, sql, orgId)
    ctx.log(`  service peak RSS: ${idle.toFixed(0)} MiB after start, ${ctx.service.peakRssMb().toFixed(0)} MiB after the creates`)
    ctx.log(`  bulk create runs (ms) ours ${created.pair.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${created.pair.raw.map((m) => m.toFixed(0)).join(', ')}`)
    const updated = await bulkUpdate(client, sql, orgId, created)
    ctx.log(`  bulk update runs (ms) ours ${updated.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${updated.raw.map((m) => m.toFixed(0)).join(', ')}`)
    ctx.log(`  service peak RSS: ${ctx.service.peakRssMb().toFixed(0)} MiB after the updates`)
    const related = await bulkRelationships(client, sql, orgId, created)
    ctx.log(`  bulk relationships runs (ms) ours ${related.ours.map((m) => m.toFixed(0)).join(', ')} | raw ${related.raw.map((m) => m.toFixed(0)).join(', ')}`)
    const rss = ctx.service.peakRssMb()
    const pglite = await pgliteCreate(ctx)
    return [
      row(`POST /bulk/assets, 10,000 servers × 8 properties (median of ${RUNS})`, created.pair,
        'ours: HTTP POST of the JSON array (client_ref per item) until the answer is read; raw: one multi-row INSERT … VALUES of the same rows (literals) through pg into the same table, fresh rows each run.'),
      row(`PATCH /bulk/assets, 10,000 servers × 2 properties (median of ${RUNS})`, updated,
        'ours: lock, merge, validate and write 10,000 servers; raw: one UPDATE … SET properties = properties || v.p FROM (VALUES …) of other 10,000 servers.'),
      row(`POST /bulk/relationships, 10,000 (median of ${RUNS})`, related,
        'ours: items naming both ends by UUID; raw: one multi-row INSERT into relationships. New (source, target) pairs every run.'),
      { metric: 'peak RSS of the service during the bulk runs', ours: rss, raw: null, unit: 'MiB', target: { on: 'ours', op: '<', value: 300 },
        note: `VmHWM of the service process (a child process of its own, running the built code, as kbis serve does), reset before the bulk runs; ${idle.toFixed(0)} MiB after start.` },
      { metric: `POST /bulk/assets, 10,000 servers, on PGlite (median of ${RUNS})`, ours: median(pglite.ms), raw: null, unit: 'ms',
        note: `the same request against a service on embedded PGlite on a data directory (its peak RSS: ${pglite.rss.toFixed(0)} MiB).` },
    ]
  } finally {
    sql.release()
  }
}
