/**
 * What a PGlite server answers while it works: four 10,000-item `POST /bulk/assets` with an
 * Idempotency-Key, each repeated 1.5 s in (CONTRACT §16: 409 while the first runs), and
 * `/healthz` asked every 20 ms meanwhile (its slowest answer). In memory, in this process, over
 * HTTP. `node --import tsx scripts/probe-during-bulk.ts` (decision 0025).
 */
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/core/config.js'
import { openDb } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { applySetup } from '../src/setup/apply.js'
import type { SetupFile } from '../src/setup/schema.js'
import { createKeyFromCli } from '../src/keys/cli.js'
import { benchSetup, serverBatch } from '../bench/lib/data.js'
const db = await openDb({ dataDir: 'memory://' })
await migrate(db)
await applySetup(db, benchSetup('bench') as unknown as SetupFile)
const { secret } = await createKeyFromCli(db, { org: 'bench', user: 'owner@bench.test', name: 'p', type: 'Admin', roles: ['all'] })
const app = await buildApp({ db, config: loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'warn' }), logger: { level: 'warn' } })
const base = await app.listen({ port: 0, host: '127.0.0.1' })
const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }
for (let run = 0; run < 4; run++) {
  const body = JSON.stringify(serverBatch(`r${run}`))
  let stop = false
  let max = 0
  const probe = (async () => { while (!stop) { const t = performance.now(); await fetch(`${base}/healthz`); max = Math.max(max, performance.now() - t); await new Promise((r) => setTimeout(r, 20)) } })()
  const t0 = performance.now()
  const first = fetch(`${base}/api/v1/bulk/assets`, { method: 'POST', headers: { ...headers, 'idempotency-key': `k${run}` }, body })
  await new Promise((r) => setTimeout(r, 1500))
  const repeat = await fetch(`${base}/api/v1/bulk/assets`, { method: 'POST', headers: { ...headers, 'idempotency-key': `k${run}` }, body })
  const repeatAt = performance.now() - t0
  const res = await first
  const firstAt = performance.now() - t0
  stop = true
  await probe
  console.log(`bulk ${res.status} in ${firstAt.toFixed(0)} ms; repeat ${repeat.status}${repeat.headers.get('idempotent-replayed') ? ' (replay)' : ''} at ${repeatAt.toFixed(0)} ms; /healthz max ${max.toFixed(0)} ms`)
}
await app.close(); await db.close()
