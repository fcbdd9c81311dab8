// Temporary: CPU profile of the service under list / search load (PostgreSQL, 20k servers).
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { benchSetup, serverBatch, SEARCH_FILTER } from '../../bench/lib/data.js'
import pg from 'pg'
import { Session } from 'node:inspector/promises'
import { writeFileSync } from 'node:fs'
import autocannon from 'autocannon'

const url = 'postgres://postgres@127.0.0.1:5432/test'
const schema = `prof_${process.pid}`
const c = new pg.Client(url); await c.connect(); await c.query(`CREATE SCHEMA ${schema}`)
const db = await openDb({ databaseUrl: url, schema })
await migrate(db)
await applySetup(db, benchSetup('bench') as unknown as SetupFile)
const { secret } = await createKeyFromCli(db, { org: 'bench', user: 'owner@bench.test', name: 'p', type: 'Admin', roles: ['all'] })
const app = await buildApp({ db, config: loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'warn' }), logger: { level: 'warn' } })
const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }
for (const b of ['a', 'b']) {
  const r = await app.inject({ method: 'POST', url: '/api/v1/bulk/assets', headers, payload: JSON.stringify(serverBatch(b)) })
  if (r.statusCode !== 201) throw new Error(r.body)
}
await app.events.flush()
await c.query(`VACUUM ANALYZE ${schema}.assets`)
const address = await app.listen({ host: '127.0.0.1', port: 0 })
const which = process.argv[2] ?? 'list'
const req = which === 'list'
  ? { method: 'GET' as const, path: '/api/v1/assets?sort=name&page[size]=100' }
  : { method: 'POST' as const, path: '/api/v1/search/assets', body: JSON.stringify({ filter: SEARCH_FILTER, sort: [{ field: 'name', order: 'asc' }], page: { number: 1, size: 50 } }) }
const load = (d: number) => autocannon({ url: address, connections: 10, duration: d, headers, requests: [req] })
await load(5)
const s = new Session(); s.connect()
await s.post('Profiler.enable'); await s.post('Profiler.start')
const r = await load(10)
const { profile } = await s.post('Profiler.stop')
writeFileSync(`/tmp/kbis-prof/${which}.cpuprofile`, JSON.stringify(profile))
console.log(which, r.requests.average, 'req/s', r.non2xx, 'non2xx')
await app.close()
await c.query(`DROP SCHEMA ${schema} CASCADE`); await c.end()
process.exit(0)
