import type pg from 'pg'
import type { Service } from './service.js'
import { api, type Api } from './http.js'

/** How a figure is judged: on ours/raw, or on our figure alone (peak RSS). */
export interface Target {
  on: 'ratio' | 'ours'
  op: '<=' | '>=' | '<'
  value: number
  /** How the target reads in the table, when `op value` alone would not say which way is better. */
  text?: string
}

/** One line of the printed table and of docs/benchmarks.md. */
export interface Row {
  metric: string
  ours: number
  /** The same work done by raw SQL (or a bare route) in the same run; null when there is none. */
  raw: number | null
  unit: 'ms' | 's' | 'req/s' | 'MiB' | 'events/s'
  target?: Target
  note?: string
}

export interface SeededOrg {
  id: string
  /** An Admin key with role `all`. */
  secret: string
}

/**
 * What every bench module gets. A module is `export async function run(ctx: BenchContext):
 * Promise<Row[]>`, listed in bench/run.ts. Loads stay on 127.0.0.1 and are bounded in time.
 */
export interface BenchContext {
  /** The service under test: a child process on PostgreSQL (its RSS is its own). */
  service: Service
  /** Organizations seeded in the service (`bench` for writes, `pages` for large reads). */
  orgs: Record<string, SeededOrg>
  /** A pool on the bench schema, for raw-SQL figures and fast seeding. */
  sql: pg.Pool
  databaseUrl: string
  schema: string
  /** Runs `fn` once per run and shares its result between modules (e.g. a seeded data set). */
  once<T>(key: string, fn: () => Promise<T>): Promise<T>
  /** Adds generated markdown to the run's docs: `write-costs` (docs/benchmarks.md), `plans` (docs/indexes-and-plans.md). */
  addSection(name: 'write-costs' | 'plans', markdown: string): void
  log(line: string): void
}

export function apiFor(ctx: BenchContext, org: string): Api {
  const seeded = ctx.orgs[org]
  if (!seeded) throw new Error(`bench: no seeded organization ${org}`)
  return api(ctx.service.url, seeded.secret)
}
