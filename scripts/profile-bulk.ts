/**
 * Where a 10,000-item bulk spends its time, statement by statement, in one process (no HTTP
 * client in between): `node --import tsx scripts/profile-bulk.ts [pglite|postgres] [runs]`.
 * Prints, per bulk kind (create, update, relationships, upsert unchanged and changed), each
 * request's time and the statements of its last run over 5 ms, with what was spent outside SQL.
 * SHOW_BACKGROUND=1 lists the background work (relay, statistics) that ran meanwhile; CPU_PROFILE=1
 * runs the V8 profiler over each kind's requests and prints the functions with the most self time.
 * PostgreSQL: a fresh schema on DATABASE_URL (default the local test database), dropped at the
 * end unless KEEP_SCHEMA=1 (then `prof_kept`, for EXPLAIN by hand).
 */
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/core/config.js'
import { openDb, type Db } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { applySetup } from '../src/setup/apply.js'
import type { SetupFile } from '../src/setup/schema.js'
import { createKeyFromCli } from '../src/keys/cli.js'
import { benchSetup, serverBatch, serverChange } from '../bench/lib/data.js'
import pg from 'pg'
import { Session } from 'node:inspector/promises'
import { selfTimeLines, type Profile } from './lib/cpu-profile.js'

const kind = process.argv[2] ?? 'pglite'
const runs = Number(process.argv[3] ?? 3)
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = process.env.KEEP_SCHEMA ? 'prof_kept' : `prof_${process.pid}`
if (kind === 'postgres') {
  const c = new pg.Client(url)
  await c.connect()
  await c.query(`CREATE SCHEMA ${schema}`)
  await c.end()
}
const db: Db = kind === 'pglite' ? await openDb({ dataDir: process.env.PGLITE_DIR || 'memory://' }) : await openDb({ databaseUrl: url, schema })
await migrate(db)
const setup = benchSetup('bench') as unknown as SetupFile
await applySetup(db, setup)
const { secret } = await createKeyFromCli(db, { org: 'bench', user: 'owner@bench.test', name: 'p', type: 'Admin', roles: ['all'] })

// Time every statement: wrap query on the db and on each transaction.
const times: { sql: string; ms: number }[] = []
const wrap = <T extends { query: (...a: any[]) => Promise<any> }>(q: T): T => {
  const orig = q.query.bind(q)
  q.query = (async (sql: string, ...rest: unknown[]) => {
    const t0 = performance.now()
    try { return await orig(sql, ...rest) } finally { times.push({ sql: sql.replace(/\s+/g, ' ').slice(0, 90), ms: performance.now() - t0 }) }
  }) as T['query']
  return q
}
wrap(db)
const origTx = db.transaction.bind(db)
db.transaction = (fn) => origTx((tx) => fn(wrap(tx)))

const app = await buildApp({ db, config: loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'warn' }), logger: { level: 'warn' } })
const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }

async function timedInject(method: 'POST' | 'PATCH' | 'PUT', path: string, body: unknown, status: number): Promise<{ ms: number; json: any }> {
  const payload = JSON.stringify(body)
  times.length = 0
  const t0 = performance.now()
  const res = await app.inject({ method, url: path, headers, payload })
  const ms = performance.now() - t0
  if (res.statusCode !== status) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body.slice(0, 300)}`)
  return { ms, json: res.json() }
}

const session = process.env.CPU_PROFILE ? new Session() : null
if (session) { session.connect(); await session.post('Profiler.enable') }
async function profileStart(): Promise<void> { if (session) await session.post('Profiler.start') }
/** The functions with the most self time since profileStart() (nothing without CPU_PROFILE). */
async function profileStop(): Promise<void> {
  if (!session) return
  const { profile } = await session.post('Profiler.stop') as { profile: Profile }
  for (const line of selfTimeLines(profile, 20)) console.log(`  ${line}`)
}

function report(label: string, samples: { ms: number; stmts: { sql: string; ms: number }[] }[]) {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(`\n${label}: request ${samples.map((s) => s.ms.toFixed(0)).join(', ')} ms`)
  const last = samples.at(-1)!
  let inSql = 0
  for (const s of last.stmts) { if (s.ms >= 5 && (process.env.SHOW_BACKGROUND || !s.sql.startsWith("/* background"))) console.log(`  ${s.ms.toFixed(0).padStart(6)} ms  ${s.sql}`); if (!s.sql.startsWith('/* background')) inSql += s.ms }
  console.log(`  ${(last.ms - inSql).toFixed(0).padStart(6)} ms  outside SQL (parse, validate, serialize) of ${last.ms.toFixed(0)}; median request ${med(samples.map((s) => s.ms)).toFixed(0)}`)
}

const created: string[][] = []
const createSamples = []
await timedInject('POST', '/api/v1/bulk/assets', serverBatch('warm'), 201)
await profileStart()
for (let r = 0; r < runs; r++) {
  const { ms, json } = await timedInject('POST', '/api/v1/bulk/assets', serverBatch(`b${r}`), 201)
  created.push(json.data.map((a: { id: string }) => a.id))
  createSamples.push({ ms, stmts: [...times] })
}
report('bulk create 10,000', createSamples)
await profileStop()

const updateSamples = []
await profileStart()
for (let r = 0; r < runs; r++) {
  const { ms } = await timedInject('PATCH', '/api/v1/bulk/assets', created[0]!.map((id, i) => ({ id, properties: serverChange(r, i) })), 200)
  updateSamples.push({ ms, stmts: [...times] })
}
report('bulk update 10,000 × 2', updateSamples)
await profileStop()

const apps = (await timedInject('POST', '/api/v1/bulk/assets', Array.from({ length: runs }, (_, i) => ({ asset_type_key: 'application', name: `a${i}`, properties: { code: `a${i}` } })), 201)).json.data.map((a: { id: string }) => a.id)
const relSamples = []
await profileStart()
for (let r = 0; r < runs; r++) {
  const { ms } = await timedInject('POST', '/api/v1/bulk/relationships', created[Math.min(r, created.length - 1)]!.map((id) => ({ relationship_type_key: 'runs_on', source_asset_id: apps[r], target_asset_id: id })), 201)
  relSamples.push({ ms, stmts: [...times] })
}
report('bulk relationships 10,000', relSamples)
await profileStop()
// PUT /bulk/assets of the first created batch by composite key: unchanged, then changed.
const batch = serverBatch('b0')
const upsertBody = (items: typeof batch) => items.map(({ asset_type_key: _, ...item }) => ({ ...item, id: `server:hostname:${item.properties.hostname as string}` }))
for (const [label, body] of [['unchanged', upsertBody(batch)], ['changed', null]] as const) {
  const samples = []
  await profileStart()
  for (let r = 0; r < runs; r++) {
    const items = body ?? upsertBody(batch.map((item, i) => ({ ...item, properties: { ...item.properties, ...serverChange(r + 10, i) } })))
    const { ms } = await timedInject('PUT', '/api/v1/bulk/assets', items, 200)
    samples.push({ ms, stmts: [...times] })
  }
  report(`upsert 10,000 ${label}`, samples)
  await profileStop()
}
console.log(`\npeak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`)

await app.close()
await db.close()
if (kind === 'postgres' && !process.env.KEEP_SCHEMA) {
  const c = new pg.Client(url)
  await c.connect()
  await c.query(`DROP SCHEMA ${schema} CASCADE`)
  await c.end()
}
