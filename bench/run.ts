/**
 * `npm run bench`: starts the service on PostgreSQL in a fresh schema (dropped at the end), runs
 * every bench module, prints one table of our figures beside raw-SQL figures from the same run,
 * and rewrites docs/benchmarks.md from it.
 *
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), BENCH_ONLY=bulk,reads
 * to run some modules. Every load is aimed at 127.0.0.1 and bounded in time; the whole run is
 * stopped after BENCH_DEADLINE_MINUTES (default 15).
 */
import { randomBytes } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import type { BenchContext, Row } from './lib/context.js'
import { benchSetup } from './lib/data.js'
import { consoleTable, meets, writeBenchmarksDoc, type Machine } from './lib/report.js'
import { startService, stopAllServices, type Service } from './lib/service.js'

type BenchModule = { run(ctx: BenchContext): Promise<Row[]> }

// One line per module; each exports `async function run(ctx: BenchContext): Promise<Row[]>`.
const MODULES: [string, () => Promise<BenchModule>][] = [
  ['bulk', () => import('./bulk.js')],
  ['reads', () => import('./reads.js')],
  ['query', () => import('./query.js')],
  ['upsert', () => import('./upsert.js')],
  ['workers', () => import('./workers.js')],
  ['sync', () => import('./sync.js')],
  ['events', () => import('./events.js')],
  ['webhooks', () => import('./webhooks.js')],
]

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test'
const SCHEMA = `bench_${randomBytes(4).toString('hex')}`
const SETUPS = path.join(os.tmpdir(), `kbis-bench-${process.pid}.json`)
const log = (line: string) => process.stdout.write(`${line}\n`)

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

async function runModules(ctx: BenchContext): Promise<{ rows: Row[]; failures: string[] }> {
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim())
  const rows: Row[] = []
  const failures: string[] = []
  for (const [name, load] of MODULES) {
    if (only && !only.includes(name)) continue
    log(`bench ${name} …`)
    const started = Date.now()
    try {
      rows.push(...(await (await load()).run(ctx)))
    } catch (err) {
      failures.push(`${name}: ${(err as Error).message}`)
      log(`bench ${name} FAILED: ${(err as Error).stack}`)
    }
    log(`bench ${name} done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  }
  return { rows, failures }
}

function machine(postgres: string, loadBefore: number[]): Machine {
  return { cpus: os.availableParallelism(), memoryGb: os.totalmem() / 1024 ** 3, node: process.version, postgres, date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC', loadBefore, loadAfter: os.loadavg() }
}

async function main(): Promise<number> {
  const loadBefore = os.loadavg()
  const postgres = await admin(async (c) => {
    await c.query(`CREATE SCHEMA ${SCHEMA}`)
    return (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version
  })
  let service: Service | null = null
  const sql = new pg.Pool({ connectionString: DATABASE_URL, max: 10, options: `-c search_path=${SCHEMA}` })
  try {
    writeFileSync(SETUPS, JSON.stringify([benchSetup('bench'), benchSetup('pages')]))
    log(`bench: schema ${SCHEMA} on ${DATABASE_URL.replace(/\/\/[^@]*@/, '//…@')}; starting the service`)
    service = await startService('serve.ts', { BENCH_STORE: 'postgres', BENCH_DATABASE_URL: DATABASE_URL, BENCH_SCHEMA: SCHEMA, BENCH_SETUPS: SETUPS })
    const shared = new Map<string, Promise<unknown>>()
    const ctx: BenchContext = {
      service, sql, databaseUrl: DATABASE_URL, schema: SCHEMA, log,
      orgs: service.ready.orgs as BenchContext['orgs'],
      once: <T>(key: string, fn: () => Promise<T>) => {
        if (!shared.has(key)) shared.set(key, fn())
        return shared.get(key) as Promise<T>
      },
    }
    const { rows, failures } = await runModules(ctx)
    log(`\n${consoleTable(rows)}\n`)
    for (const failure of failures) log(`FAILED ${failure}`)
    const notes = rows.filter((r) => r.note).map((r) => `**${r.metric}**: ${r.note}`)
    writeBenchmarksDoc(path.join(ROOT, 'docs/benchmarks.md'), rows, machine(postgres, loadBefore), failures, notes)
    log('bench: wrote docs/benchmarks.md')
    return failures.length > 0 ? 1 : rows.some((r) => meets(r) === false) ? 2 : 0
  } finally {
    await service?.stop().catch(() => undefined)
    await sql.end().catch(() => undefined)
    rmSync(SETUPS, { force: true })
    await admin((c) => c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)).catch((err) => log(`bench: could not drop ${SCHEMA}: ${err}`))
  }
}

const deadlineMinutes = Number(process.env.BENCH_DEADLINE_MINUTES || 15)
const deadline = setTimeout(() => {
  log(`bench: still running after ${deadlineMinutes} minutes; stopping`)
  stopAllServices()
  void admin((c) => c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)).finally(() => process.exit(3))
}, deadlineMinutes * 60_000)
deadline.unref()

main()
  .then((code) => {
    stopAllServices()
    process.exit(code)
  })
  .catch((err) => {
    log(`bench failed: ${(err as Error).stack}`)
    stopAllServices()
    process.exit(1)
  })
