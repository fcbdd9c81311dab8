/**
 * Reads on 200,000 assets: GET /assets/{id} under load beside a bare Fastify route doing the same
 * SELECT with pg, and GET /assets pages 1 and 1000 (size 100, sorted by name) beside the same
 * statements run through pg.
 */
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { expectStatus } from './lib/http.js'
import { seedServers } from './lib/seed.js'
import { startService } from './lib/service.js'
import { median, timed } from './lib/stats.js'
import { DEEP_PAGE, fmtCount, LOAD as CONFIG_LOAD, QUICK, SIZE } from './lib/config.js'
import { loadWindow, meanLoad, type Load } from './lib/load.js'

const ASSETS = SIZE
const SAMPLES = QUICK ? 3 : 15
// Both servers need ~15 s of load before their rate settles (V8 optimizes the hot paths; pg and
// PostgreSQL warm their caches): measuring earlier compares warm-up speeds, not servers.
const LOAD = { ...CONFIG_LOAD, warmupSeconds: QUICK ? CONFIG_LOAD.warmupSeconds : 15 }
const load = (url: string, paths: readonly string[], headers: Record<string, string>, seconds: number): Promise<Load> =>
  loadWindow(url, { method: 'GET', paths, headers }, seconds)

/**
 * Both servers warm up, then take turns (ours, bare, ours, bare): a change in the machine's load
 * during the run then weighs on both alike. The figure is the mean of each one's two windows.
 */
async function loadBoth(ctx: BenchContext, ids: readonly string[]): Promise<{ ours: Load; bare: Load }> {
  const sample = ids.filter((_, i) => i % 199 === 0)
  const headers = { authorization: `Bearer ${ctx.orgs.pages!.secret}` }
  const oursPaths = sample.map((id) => `/api/v1/assets/${id}`)
  const barePaths = sample.map((id) => `/assets/${id}`)
  const bare = await startService('bare.ts', { BENCH_DATABASE_URL: ctx.databaseUrl, BENCH_SCHEMA: ctx.schema, BENCH_ORG_ID: ctx.orgs.pages!.id })
  try {
    const ours = () => load(ctx.service.url, oursPaths, headers, LOAD.seconds)
    const bareLoad = () => load(bare.url, barePaths, {}, LOAD.seconds)
    await load(ctx.service.url, oursPaths, headers, LOAD.warmupSeconds)
    await load(bare.url, barePaths, {}, LOAD.warmupSeconds)
    const rounds = { ours: [] as Load[], bare: [] as Load[] }
    for (let r = 0; r < 2; r++) {
      rounds.ours.push(await ours())
      rounds.bare.push(await bareLoad())
    }
    ctx.log(`  GET /assets/{id} req/s ours ${rounds.ours.map((l) => l.rps.toFixed(0)).join(', ')} | bare ${rounds.bare.map((l) => l.rps.toFixed(0)).join(', ')}`)
    return { ours: meanLoad(rounds.ours), bare: meanLoad(rounds.bare) }
  } finally {
    await bare.stop()
  }
}

/** Median of 15 sequential requests after 3 untimed ones, ours and the same SQL through pg. */
async function page(ctx: BenchContext, number: number): Promise<{ ours: number; raw: number }> {
  const client = apiFor(ctx, 'pages')
  const url = `/api/v1/assets?sort=name&page[size]=100&page[number]=${number}`
  const oursOnce = async () => {
    const { ms, result } = await timed(() => client.send('GET', url))
    expectStatus(result, 200, `GET ${url}`)
    if ((JSON.parse(result.text) as { data: unknown[] }).data.length !== 100) throw new Error(`bench: ${url} did not answer 100 assets`)
    return ms
  }
  const orgId = ctx.orgs.pages!.id
  const rawOnce = async () => (await timed(() => Promise.all([
    ctx.sql.query(`SELECT a.id, a.asset_type_key, a.name, a.access_domain_key, a.properties, a.created_at, a.updated_at FROM assets a
                   WHERE a.org_id = $1 AND a.archived_at IS NULL ORDER BY a.name, a.id LIMIT 100 OFFSET $2`, [orgId, (number - 1) * 100]),
    ctx.sql.query('SELECT count(*)::int AS n FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL', [orgId]),
  ]))).ms
  const runs = { ours: [] as number[], raw: [] as number[] }
  for (let i = 0; i < 3 + SAMPLES; i++) {
    const [o, r] = [await oursOnce(), await rawOnce()]
    if (i >= 3) runs.ours.push(o), runs.raw.push(r)
  }
  return { ours: median(runs.ours), raw: median(runs.raw) }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  const ids = await seedServers(ctx, 'pages', ASSETS)
  const { ours, bare } = await loadBoth(ctx, ids)
  const first = await page(ctx, 1)
  const thousandth = await page(ctx, DEEP_PAGE)
  const pageNote = (n: number) => `sequential requests, median of 15; raw: the page SELECT (ORDER BY name, id LIMIT 100 OFFSET ${(n - 1) * 100}) and the count, in parallel through pg, as the service runs them.`
  return [
    { metric: `GET /assets/{id}, throughput, 10 connections × ${LOAD.seconds} s`, ours: ours.rps, raw: bare.rps, unit: 'req/s', target: { on: 'ratio', op: '>=', value: 0.8 },
      note: `autocannon in the bench process after a ${LOAD.warmupSeconds} s warm-up of each server, then two windows each, taking turns (mean shown), cycling over ${Math.ceil(ids.length / 199)} ids of ${ASSETS} assets; bare: a Fastify route doing the same SELECT with pg, no auth, in its own child process.` },
    { metric: 'GET /assets/{id}, p99 latency under that load (mean of the two windows)', ours: ours.p99, raw: bare.p99, unit: 'ms' },
    { metric: `GET /assets?sort=name&page[size]=100, page 1 (${fmtCount(ASSETS)} assets)`, ours: first.ours, raw: first.raw, unit: 'ms', note: pageNote(1) },
    { metric: `GET /assets?sort=name&page[size]=100, page ${DEEP_PAGE} (${fmtCount(ASSETS)} assets)`, ours: thousandth.ours, raw: thousandth.raw, unit: 'ms', note: pageNote(DEEP_PAGE) },
  ]
}
