/**
 * Where a read request spends its CPU time in the service process: builds the app on a fresh
 * PostgreSQL schema (DATABASE_URL, default the local test database) with 20,000 servers, puts 10
 * connections of load on one read for 10 s (after 5 s of warm-up; autocannon in a child process, so
 * that the profile holds the service's work only) with the V8 profiler on, and
 * prints the throughput and the functions with the most self time.
 * `node --import tsx scripts/profile-reads.ts [list|search|export|export-csv] [out.cpuprofile]` (export: the
 * 20,000 servers as NDJSON or CSV, 2 connections); STORE=pglite for embedded PGlite (PGLITE_DIR: its data
 * directory, default in memory).
 * (open the .cpuprofile in Chrome DevTools for the whole tree). NO_PROFILE=1: the throughput only,
 * without the profiler's overhead. The schema is dropped at the end.
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { selfTimeLines, type Profile } from './lib/cpu-profile.js'
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/core/config.js'
import { openDb } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { applySetup } from '../src/setup/apply.js'
import type { SetupFile } from '../src/setup/schema.js'
import { createKeyFromCli } from '../src/keys/cli.js'
import { benchSetup, serverBatch, SEARCH_FILTER } from '../bench/lib/data.js'

const run = promisify(execFile)
const which = process.argv[2] ?? 'list'
const out = process.argv[3]
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
// STORE=pglite: the same on embedded PGlite, on a fresh data directory (PGLITE_DIR, default memory://).
const pglite = process.env.STORE === 'pglite'
const schema = `prof_reads_${process.pid}`
const admin = new pg.Client(url)
if (!pglite) {
  await admin.connect()
  await admin.query(`CREATE SCHEMA ${schema}`)
}
try {
  const db = pglite ? await openDb({ dataDir: process.env.PGLITE_DIR || 'memory://' }) : await openDb({ databaseUrl: url, schema })
  await migrate(db)
  await applySetup(db, benchSetup('bench') as unknown as SetupFile)
  const { secret } = await createKeyFromCli(db, { org: 'bench', user: 'owner@bench.test', name: 'profile', type: 'Admin', roles: ['all'] })
  const app = await buildApp({ db, config: loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'warn' }), logger: { level: 'warn' } })
  const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }
  for (const batch of ['a', 'b']) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/bulk/assets', headers, payload: JSON.stringify(serverBatch(batch)) })
    if (res.statusCode !== 201) throw new Error(`seeding: ${res.statusCode} ${res.body.slice(0, 200)}`)
  }
  await app.events.flush()
  if (pglite) await db.query('VACUUM ANALYZE')
  else await admin.query(`VACUUM ANALYZE ${schema}.assets`)
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  const request = which === 'search'
    ? { method: 'POST' as const, path: '/api/v1/search/assets', body: JSON.stringify({ filter: SEARCH_FILTER, sort: [{ field: 'name', order: 'asc' }], page: { number: 1, size: 50 } }) }
    : which === 'export'
      ? { method: 'GET' as const, path: '/api/v1/export/assets?format=ndjson' }
      : which === 'export-csv'
        ? { method: 'GET' as const, path: '/api/v1/export/assets?format=csv&filter[asset_type_key]=server' }
      : { method: 'GET' as const, path: '/api/v1/assets?sort=name&page[size]=100' }
  // The load runs in a process of its own: the profile holds the service's work only.
  const body: string | undefined = 'body' in request ? request.body : undefined
  const load = async (seconds: number) => {
    const args = ['-c', which.startsWith('export') ? '2' : '10', '-d', String(seconds), '-m', request.method, '--json',
      ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}=${v}`]), ...(body ? ['-b', body] : []), `${address}${request.path}`]
    const { stdout } = await run(path.resolve('node_modules/.bin/autocannon'), args, { maxBuffer: 1 << 24 })
    return JSON.parse(stdout) as { requests: { average: number }; non2xx: number }
  }
  await load(5)
  if (process.env.NO_PROFILE === '1') {
    const result = await load(10)
    await app.close()
    console.log(`${which}: ${result.requests.average.toFixed(0)} req/s, ${result.non2xx} non-2xx`)
  } else {
    const session = new Session()
    session.connect()
    await session.post('Profiler.enable')
    await session.post('Profiler.start')
    const result = await load(10)
    const { profile } = await session.post('Profiler.stop') as { profile: Profile }
    await app.close()
    if (out) writeFileSync(out, JSON.stringify(profile))
    console.log(`${which}: ${result.requests.average.toFixed(0)} req/s, ${result.non2xx} non-2xx`)
    for (const line of selfTimeLines(profile, 25)) console.log(line)
  }
} finally {
  if (!pglite) {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.end()
  }
}
process.exit(0)
