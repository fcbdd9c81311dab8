/**
 * Operating at scale (issue 14): GET /assets/{id} and POST /search/assets throughput of
 * `kbis serve --workers 1` vs `--workers 2` on the bench data, and search throughput of one
 * server on a primary alone vs the same primary with a streaming replica (DATABASE_READ_URL),
 * set up for the run with the machine's PostgreSQL 15 binaries (test/helpers/replica.ts).
 * On a 2-core machine the load generator shares the cores with the servers: read the ratios.
 *
 * BENCH_WORKERS_SECONDS (default 10) sets each load window, BENCH_WORKERS_ASSETS (default 200,000,
 * the reads module's set) and BENCH_REPLICA_ASSETS (default 50,000) the data sets.
 */
import { spawn } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import { v7 } from 'uuid'
import type { BenchContext, Row } from './lib/context.js'
import { benchSetup } from './lib/data.js'
import { seedServers } from './lib/seed.js'
import { LOAD, QUICK, SIZE } from './lib/config.js'
import { openDb } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { applySetup } from '../src/setup/apply.js'
import type { SetupFile } from '../src/setup/schema.js'
import { createKeyFromCli } from '../src/keys/cli.js'
import { freePort } from '../test/helpers/cli-server.js'
import { startReplicaPair } from '../test/helpers/replica.js'

const SECONDS = Number(process.env.BENCH_WORKERS_SECONDS || LOAD.seconds)
const REPLICA_ASSETS = Number(process.env.BENCH_REPLICA_ASSETS || (QUICK ? 5_000 : 50_000))
// The reads module's data set by default (seeded once per run and shared).
const ASSETS = Number(process.env.BENCH_WORKERS_ASSETS || SIZE)
const SEARCH = JSON.stringify({ filter: { field: 'properties.environment', operator: 'equals', value: 'prod' }, sort: [{ field: 'name' }], page: { size: 50 } })

/** `kbis serve` (bin/kbis over dist/) in a child process; resolves once it prints that it listens. */
async function serve(args: string[], env: Record<string, string>): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort()
  const child = spawn('bin/kbis', ['serve', '--port', String(port), ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('bench: kbis serve did not start in 120 s')) }, 120_000)
    child.once('exit', (code) => reject(new Error(`bench: kbis serve exited with ${code}`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^kbis listening on (\S+)/.exec(line)
      if (m) { clearTimeout(timer); resolve(m[1]!) }
    })
  })
  return {
    url,
    stop: () => new Promise((resolve) => { child.once('exit', () => resolve()); child.kill('SIGTERM') }),
  }
}

/** Requests per second over one window (after a warm-up of the same length), 10 connections on 127.0.0.1. */
async function rps(url: string, secret: string, request: { method: 'GET' | 'POST'; paths: string[]; body?: string }): Promise<number> {
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) throw new Error(`bench: load is aimed only at 127.0.0.1, not ${url}`)
  let next = 0
  const once = async () => {
    const result = await autocannon({
      url, connections: 10, duration: SECONDS,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      requests: [{ method: request.method, ...(request.body ? { body: request.body } : {}), setupRequest: (req: any) => ({ ...req, path: request.paths[next++ % request.paths.length] }) }],
    })
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`bench: ${url} answered ${result.non2xx} non-2xx and ${result.errors} errors under load`)
    return result.requests.average
  }
  await once()
  return once()
}

async function workersRows(ctx: BenchContext): Promise<Row[]> {
  const ids = await seedServers(ctx, 'pages', ASSETS)
  const secret = ctx.orgs.pages!.secret
  const url = new URL(ctx.databaseUrl)
  url.searchParams.set('options', `-c search_path=${ctx.schema}`)
  const byId = { method: 'GET' as const, paths: ids.filter((_, i) => i % 199 === 0).map((id) => `/api/v1/assets/${id}`) }
  const search = { method: 'POST' as const, paths: ['/api/v1/search/assets'], body: SEARCH }
  const figures: Record<number, { get: number; search: number }> = {}
  for (const workers of [1, 2]) {
    const server = await serve(['--workers', String(workers)], { DATABASE_URL: url.href })
    try {
      figures[workers] = { get: await rps(server.url, secret, byId), search: await rps(server.url, secret, search) }
    } finally {
      await server.stop()
    }
    ctx.log(`  --workers ${workers}: GET by id ${figures[workers]!.get.toFixed(0)} req/s, search ${figures[workers]!.search.toFixed(0)} req/s`)
  }
  const note = `autocannon (10 connections, ${SECONDS} s after a ${SECONDS} s warm-up) in the bench process, which shares the machine's ${availableParallelism()} cores with the workers; raw: --workers 1.`
  return [
    { metric: `GET /assets/{id} throughput, --workers 2 (raw: --workers 1; ${ASSETS} assets)`, ours: figures[2]!.get, raw: figures[1]!.get, unit: 'req/s', note },
    { metric: `POST /search/assets throughput, --workers 2 (raw: --workers 1; ${ASSETS} assets)`, ours: figures[2]!.search, raw: figures[1]!.search, unit: 'req/s', note },
  ]
}

async function replicaRows(ctx: BenchContext): Promise<Row[]> {
  const pair = await startReplicaPair()
  try {
    const db = await openDb({ databaseUrl: pair.primaryUrl, poolSize: 2 })
    let secret: string
    try {
      await migrate(db)
      const org = await applySetup(db, benchSetup('replica') as unknown as SetupFile)
      secret = (await createKeyFromCli(db, { org: 'replica', user: 'owner@replica.test', name: 'bench', type: 'Admin', roles: ['all'] })).secret
      for (let start = 0; start < REPLICA_ASSETS; start += 10_000) {
        const batch = Array.from({ length: Math.min(10_000, REPLICA_ASSETS - start) }, () => v7())
        await db.query(
          `INSERT INTO assets (org_id, id, asset_type_key, name, properties, unique_value, created_at, updated_at)
           SELECT $1, u.id, 'server', 'srv-' || lpad((n::bigint * 7919 % $3)::text, 7, '0'),
                  jsonb_build_object('hostname', 'h-' || n, 'environment', (ARRAY['dev','staging','prod'])[1 + n % 3], 'cpu_count', 2 + n % 30),
                  'h-' || n, date_trunc('second', now()), date_trunc('second', now())
           FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, i), LATERAL (SELECT ($4::int + u.i - 1)::int AS n) AS k`,
          [org.organization.id, batch, REPLICA_ASSETS, start])
      }
      await db.query('ANALYZE')
    } finally {
      await db.close()
    }
    await pair.caughtUp()
    const search = { method: 'POST' as const, paths: ['/api/v1/search/assets'], body: SEARCH }
    const measure = async (env: Record<string, string>) => {
      const server = await serve([], env)
      try { return await rps(server.url, secret, search) } finally { await server.stop() }
    }
    const alone = await measure({ DATABASE_URL: pair.primaryUrl })
    const withReplica = await measure({ DATABASE_URL: pair.primaryUrl, DATABASE_READ_URL: pair.replicaUrl })
    ctx.log(`  search: primary alone ${alone.toFixed(0)} req/s, primary + replica ${withReplica.toFixed(0)} req/s`)
    return [{
      metric: `POST /search/assets throughput, primary + replica (raw: primary alone; ${REPLICA_ASSETS} assets)`, ours: withReplica, raw: alone, unit: 'req/s',
      note: 'one kbis process; primary and hot standby are throwaway PostgreSQL 15 clusters on this same machine (initdb, pg_basebackup -R), so the replica adds no hardware: the figure shows what the routing costs, not what a second host gains.',
    }]
  } finally {
    await pair.close()
  }
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  return [...(await workersRows(ctx)), ...(await replicaRows(ctx))]
}
