/**
 * `npm run soak`: a mixed load for SOAK_SECONDS (60) against a server started here, in its own
 * process (bench/serve.ts: PGlite in memory, or PostgreSQL when SOAK_DATABASE_URL is set, in a
 * fresh schema dropped afterwards). Reports the server's RSS at start, at its peak and at the end,
 * the answers by status, and every answer that is neither 2xx nor 4xx (exit code 1 if any).
 * Not part of CI. Env: SOAK_SECONDS, SOAK_CONCURRENCY (8), SOAK_DATABASE_URL.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { ACME } from '../test/helpers/fixtures.js'
import { openDb } from '../src/store/db.js'
import { allocatorTunables } from '../src/ops/heap.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const SECONDS = Number(process.env.SOAK_SECONDS ?? 60)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 8)
const DATABASE_URL = process.env.SOAK_DATABASE_URL

const tmp = mkdtempSync(path.join(tmpdir(), 'kbis-soak-'))
const setups = path.join(tmp, 'setups.json')
writeFileSync(setups, JSON.stringify([{ ...ACME, organization: { ...ACME.organization, rate_limit: { requests: 100_000_000, window_seconds: 60 } } }]))
const schema = `soak_${randomBytes(4).toString('hex')}`
if (DATABASE_URL) {
  const admin = await openDb({ databaseUrl: DATABASE_URL, poolSize: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  await admin.close()
}

const child = spawn(process.execPath, ['--import', 'tsx', 'bench/serve.ts'], {
  cwd: ROOT,
  // GLIBC_TUNABLES: what bin/kbis gives a `kbis` process on that store (decisions 0020, 0026), unless set here.
  env: { GLIBC_TUNABLES: allocatorTunables(DATABASE_URL), ...process.env, BENCH_STORE: DATABASE_URL ? 'postgres' : 'pglite', BENCH_DATABASE_URL: DATABASE_URL, BENCH_SCHEMA: schema, BENCH_SETUPS: setups },
  stdio: ['ignore', 'pipe', 'inherit'],
})
const ready = await new Promise<{ url: string; orgs: Record<string, { secret: string }> }>((resolve, reject) => {
  child.once('exit', (code) => reject(new Error(`the server exited with ${code}`)))
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      const parsed = JSON.parse(line) as { bench?: string; url: string; orgs: Record<string, { secret: string }> }
      if (parsed.bench === 'ready') resolve(parsed)
    } catch { /* a log line */ }
  })
})
const key = ready.orgs.acme!.secret

/** The server's resident set size in MB (Linux /proc). */
function rssMb(): number {
  try {
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
    return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024)
  } catch {
    return 0
  }
}

const byStatus = new Map<number, number>()
const unexpected: string[] = []
const ids: string[] = []
let n = 0

async function call(method: string, url: string, body?: unknown): Promise<any> {
  try {
    const res = await fetch(`${ready.url}${url}`, {
      method, headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    const text = await res.text()
    byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1)
    if (res.status >= 500 || res.status < 200 || (res.status >= 300 && res.status < 400)) {
      if (unexpected.length < 50) unexpected.push(`${method} ${url} → ${res.status} ${text.slice(0, 300)}`)
    }
    return text ? JSON.parse(text) : null
  } catch (err) {
    byStatus.set(0, (byStatus.get(0) ?? 0) + 1)
    if (unexpected.length < 50) unexpected.push(`${method} ${url} → no answer: ${(err as Error).message}`)
    return null
  }
}

const pick = <T>(list: T[]): T | undefined => list[Math.floor(Math.random() * list.length)]

/** One step of the mix: writes, reads, search, analytics, bulk, relationships, deletes. */
async function step(): Promise<void> {
  const i = n++
  const r = Math.random()
  const id = pick(ids)
  if (r < 0.15 || !id) {
    const res = await call('POST', '/api/v1/assets', { asset_type_key: 'server', name: `soak-${i}`, access_domain_key: 'it', properties: { hostname: `soak-${i}-${randomBytes(3).toString('hex')}`, cpu_count: 1 + (i % 64), environment: ['dev', 'staging', 'prod'][i % 3], tags: ['pci'] } })
    if (res?.data?.id) ids.push(res.data.id)
  } else if (r < 0.35) await call('GET', `/api/v1/assets?filter[asset_type_key]=server&sort=-created_at&page[size]=50&page[number]=${1 + (i % 5)}`)
  else if (r < 0.45) await call('GET', `/api/v1/assets/${id}?include=relationships,relationships.related_asset`)
  else if (r < 0.55) await call('PATCH', `/api/v1/assets/${id}`, { name: `soak-renamed-${i}`, properties: { cpu_count: 1 + (i % 32) } })
  else if (r < 0.67) await call('POST', '/api/v1/search/assets', { filter: { or: [{ field: 'name', operator: 'contains', value: `${i % 10}` }, { field: 'properties.cpu_count', operator: 'greater_than', value: i % 50 }] }, sort: [{ field: 'name', order: 'asc' }], page: { size: 25 } })
  else if (r < 0.75) await call('POST', '/api/v1/analytics/assets', { measures: [{ type: 'count' }, { type: 'average', field: 'properties.cpu_count' }], group_by: ['properties.environment'] })
  else if (r < 0.8) {
    const res = await call('POST', '/api/v1/bulk/assets', Array.from({ length: 50 }, (_, j) => ({ asset_type_key: 'note', name: `bulk-${i}-${j}`, client_ref: `c${j}` })))
    for (const d of res?.data ?? []) if (Math.random() < 0.1) ids.push(d.id)
  } else if (r < 0.88) {
    const other = pick(ids)
    if (other && other !== id) await call('PATCH', `/api/v1/assets/${id}`, { relationships: { outgoing: { depends_on: { related_assets: [{ id: other }] } } } })
  } else if (r < 0.92) {
    await call('DELETE', `/api/v1/assets/${id}`)
    ids.splice(ids.indexOf(id), 1)
  } else if (r < 0.96) await call('GET', '/api/v1/metamodel/asset-types')
  else await call('GET', '/api/v1/assets/server:hostname:nope')
}

const start = rssMb()
let peak = start
const sampler = setInterval(() => { peak = Math.max(peak, rssMb()) }, 250)
const until = Date.now() + SECONDS * 1000
const began = Date.now()
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (Date.now() < until) await step()
}))
clearInterval(sampler)
const end = rssMb()
peak = Math.max(peak, end)
const elapsed = (Date.now() - began) / 1000

console.log(`soak: ${n} requests in ${elapsed.toFixed(1)} s (${Math.round(n / elapsed)}/s), ${CONCURRENCY} concurrent, ${DATABASE_URL ? 'PostgreSQL' : 'PGlite'}`)
console.log(`RSS (MB): start ${start}, peak ${peak}, end ${end}`)
console.log(`answers by status: ${JSON.stringify(Object.fromEntries([...byStatus.entries()].sort((a, b) => a[0] - b[0])))}`)
console.log(unexpected.length === 0 ? 'no answer outside 2xx/4xx' : `answers outside 2xx/4xx (first ${unexpected.length}):\n${unexpected.join('\n')}`)

child.kill('SIGTERM')
await new Promise((resolve) => child.once('exit', resolve))
rmSync(tmp, { recursive: true, force: true })
if (DATABASE_URL) {
  const admin = await openDb({ databaseUrl: DATABASE_URL, poolSize: 1 })
  await admin.query(`DROP SCHEMA ${schema} CASCADE`)
  await admin.close()
}
process.exit(unexpected.length === 0 ? 0 : 1)
