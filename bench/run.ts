/**
 * `npm run bench`: starts the service on PostgreSQL in a fresh schema (dropped at the end), runs
 * every bench module (`limits` measures against the physical limit on PostgreSQL and on PGlite),
 * prints one table of our figures beside the limit / raw-SQL figures from the same run and the
 * previous run's, and rewrites docs/benchmarks.md, docs/benchmarks.json and the generated plans of
 * docs/indexes-and-plans.md from it.
 *
 * Env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), BENCH_ONLY=limits,bulk
 * to run some modules, BENCH_SIZE / --size (default 200000), BENCH_QUICK=1 / --quick (short
 * windows; docs written to a temporary directory, BENCH_DOCS_DIR to choose). Every load is aimed at
 * 127.0.0.1 and bounded in time; the whole run (≈ 15 minutes at 200,000 on an idle 2-core machine)
 * is stopped after BENCH_DEADLINE_MINUTES (default 25, 60 above 200,000 assets).
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import type { BenchContext, Row } from './lib/context.js'
import { benchSetup } from './lib/data.js'
import { consoleTable, meets, readPrevious, setPrevious, writeBenchmarksDoc, writePlans, type Machine } from './lib/report.js'
import { DOCS_DIR, QUICK, REPO_DOCS, SIZE } from './lib/config.js'
import { startService, stopAllServices, type Service } from './lib/service.js'

type BenchModule = { run(ctx: BenchContext): Promise<Row[]> }

// One line per module; each exports `async function run(ctx: BenchContext): Promise<Row[]>`.
const MODULES: [string, () => Promise<BenchModule>][] = [
  ['limits', () => import('./limits.js')],
  ['bulk', () => import('./bulk.js')],
  ['reads', () => import('./reads.js')],
  ['query', () => import('./query.js')],
  ['upsert', () => import('./upsert.js')],
  ['workers', () => import('./workers.js')],
  ['sync', () => import('./sync.js')],
  ['events', () => import('./events.js')],
  ['webhooks', () => import('./webhooks.js')],
]

const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test'
const SCHEMA = `bench_${randomBytes(4).toString('hex')}`
const SETUPS = path.join(os.tmpdir(), `kbis-bench-${process.pid}.json`)
const log = (line: string) => process.stdout.write(`${line}\n`)

// The CLI modules (workers, sync) run bin/kbis.js over dist/: rebuilt first if a source is newer.
execFileSync(process.execPath, ['scripts/build-if-stale.mjs'], { stdio: ['ignore', 2, 2] })

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
  return { size: SIZE, quick: QUICK, cpus: os.availableParallelism(), cpuModel: cpuModel(), memoryGb: os.totalmem() / 1024 ** 3, node: process.version, postgres, date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC', loadBefore, loadAfter: os.loadavg() }
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
    service = await startService('serve.ts', { BENCH_STORE: 'postgres', BENCH_DATABASE_URL: DATABASE_URL, BENCH_SCHEMA: SCHEMA, BENCH_SETUPS: SETUPS, BENCH_RAW: '1' })
    const shared = new Map<string, Promise<unknown>>()
    const sections: Record<string, string> = {}
    const ctx: BenchContext = {
      service, sql, databaseUrl: DATABASE_URL, schema: SCHEMA, log,
      orgs: service.ready.orgs as BenchContext['orgs'],
      addSection: (name, markdown) => { sections[name] = markdown },
      once: <T>(key: string, fn: () => Promise<T>) => {
        if (!shared.has(key)) shared.set(key, fn())
        return shared.get(key) as Promise<T>
      },
    }
    mkdirSync(DOCS_DIR, { recursive: true })
    const previous = readPrevious(path.join(DOCS_DIR, 'benchmarks.json'))
    setPrevious(previous)
    const { rows, failures } = await runModules(ctx)
    log(`\n${consoleTable(rows)}\n`)
    if (sections['write-costs']) log(`write cost breakdown\n\n${sections['write-costs']}`)
    for (const failure of failures) log(`FAILED ${failure}`)
    const notes = rows.filter((r) => r.note).map((r) => `**${r.metric}**: ${r.note}`)
    const run = machine(postgres, loadBefore)
    writeBenchmarksDoc(DOCS_DIR, rows, run, failures, notes, sections['write-costs'] ?? '', previous)
    if (sections.plans) writePlans(path.join(REPO_DOCS, 'indexes-and-plans.md'), path.join(DOCS_DIR, 'indexes-and-plans.md'), sections.plans, run)
    log(`bench: wrote benchmarks.md, benchmarks.json${sections.plans ? ' and the plans of indexes-and-plans.md' : ''} in ${DOCS_DIR}`)
    return failures.length > 0 ? 1 : rows.some((r) => meets(r) === false) ? 2 : 0
  } finally {
    await service?.stop().catch(() => undefined)
    await sql.end().catch(() => undefined)
    rmSync(SETUPS, { force: true })
    await admin((c) => c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)).catch((err) => log(`bench: could not drop ${SCHEMA}: ${err}`))
  }
}

const deadlineMinutes = Number(process.env.BENCH_DEADLINE_MINUTES || (SIZE > 200_000 ? 60 : 25))
const deadline = setTimeout(() => {
  log(`bench: still running after ${deadlineMinutes} minutes; stopping`)
  stopAllServices()
  void admin((c) => c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)).finally(() => process.exit(3))
}, deadlineMinutes * 60_000)
deadline.unref()

/** `AMD EPYC` (with `, 2596 MHz` when the kernel tells the clock): the first CPU's model. */
function cpuModel(): string {
  const cpu = os.cpus()[0]
  return cpu ? `${cpu.model.trim()}${cpu.speed > 0 ? `, ${cpu.speed} MHz` : ''}` : 'unknown'
}

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
