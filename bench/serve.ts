/**
 * The service under test, in its own process: store → migrations → seeded organizations and
 * keys → buildApp → listen on 127.0.0.1 (a random port). Prints one ready line for the runner.
 * Env: BENCH_STORE (postgres | pglite), BENCH_DATABASE_URL, BENCH_SCHEMA, BENCH_SETUPS (a JSON file),
 * BENCH_PGLITE_DIR (a PGlite data directory; in memory without it), BENCH_RAW=1 (also serve the
 * bench's raw-SQL routes, bench/lib/raw-routes.ts, on a second port).
 */
import { readFileSync } from 'node:fs'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/core/config.js'
import { openDb } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { applySetup } from '../src/setup/apply.js'
import type { SetupFile } from '../src/setup/schema.js'
import { createKeyFromCli } from '../src/keys/cli.js'
import { startRawRoutes } from './lib/raw-routes.js'
import { applyHeapPolicy } from '../src/ops/heap.js'

const env = process.env
// As `kbis serve` does before it opens its store (KBIS_OPTIMIZE_FOR_SIZE, by default on with PGlite only;
// KBIS_HEAP_GROWTH_PERCENT, by default 30 where the first is off).
const serveConfig = loadConfig(env)
applyHeapPolicy({ optimizeForSize: serveConfig.optimizeForSize, heapGrowthPercent: serveConfig.heapGrowthPercent, databaseUrl: env.BENCH_STORE === 'pglite' ? undefined : env.BENCH_DATABASE_URL })
// As `kbis serve` opens its store (openStore), the planner's price of parallel workers
// (KBIS_PG_PARALLEL_SETUP_COST, decision 0019) on every pooled connection. (Not its statement
// timeout: the 1,000,000-asset run's statements may pass 10 s on a slow day.)
const db = env.BENCH_STORE === 'pglite'
  ? await openDb({ dataDir: env.BENCH_PGLITE_DIR || 'memory://' })
  : await openDb({ databaseUrl: env.BENCH_DATABASE_URL, schema: env.BENCH_SCHEMA, poolSize: 10, parallelSetupCost: serveConfig.pgParallelSetupCost })
await migrate(db)

const orgs: Record<string, { id: string; secret: string }> = {}
for (const setup of JSON.parse(readFileSync(env.BENCH_SETUPS!, 'utf8')) as (SetupFile & { organization: { key: string }; users: { email: string }[] })[]) {
  const report = await applySetup(db, setup)
  const key = await createKeyFromCli(db, { org: setup.organization.key, user: setup.users[0]!.email, name: 'bench', type: 'Admin', roles: ['all'] })
  orgs[setup.organization.key] = { id: report.organization.id, secret: key.secret }
}

// As `kbis serve` runs it, logging at warn: per-request info lines are an operator's choice.
// Webhook receivers of the bench listen on 127.0.0.1 (bench/webhooks.ts).
const config = loadConfig({}, { host: '127.0.0.1', port: 0, logLevel: 'warn', poolSize: 10, webhookAllowPrivate: true })
const app = await buildApp({ db, config, logger: { level: 'warn' } })
const url = await app.listen({ host: '127.0.0.1', port: 0 })
// The limit's raw routes: on PostgreSQL a pool of their own with the server's settings (the raw
// side is what plain SQL gets); PGlite has one store per process.
const rawDb = env.BENCH_RAW !== '1' ? null
  : env.BENCH_STORE === 'pglite' ? db : await openDb({ databaseUrl: env.BENCH_DATABASE_URL, schema: env.BENCH_SCHEMA, poolSize: 10 })
const raw = rawDb === null ? null : await startRawRoutes(rawDb, db)
process.stdout.write(`${JSON.stringify({ bench: 'ready', url, rawUrl: raw?.url ?? null, orgs })}\n`)

process.on('SIGTERM', () => {
  void app.close().then(() => raw?.close()).then(() => (rawDb !== null && rawDb !== db ? rawDb.close() : undefined)).then(() => db.close()).finally(() => process.exit(0))
})
