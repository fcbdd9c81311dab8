import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'

export type StoreKind = 'postgres' | 'pglite'

export interface Statement {
  sql: string
  params?: unknown[]
}

/**
 * Raw SQL on a store, beside the service: on PostgreSQL through the bench's own `pg` pool (timed
 * in the bench process, round trip included, as a client of the database sees it); on PGlite
 * through the service's raw routes (bench/lib/raw-routes.ts), timed inside the process that owns
 * the embedded database (the engine alone: no HTTP in the figure).
 */
export interface RawStore {
  kind: StoreKind
  /** "PostgreSQL" or "PGlite", for the printed figures. */
  label: string
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>
  /** Milliseconds of one statement. */
  timed(sql: string, params?: unknown[]): Promise<number>
  /** Milliseconds of `timed` after `before`, all in one transaction that is rolled back. */
  timedInTx(before: Statement[], timed: Statement): Promise<number>
  /** Milliseconds of `COPY table (columns) FROM STDIN` of `tsv` (text format). */
  copy(table: string, columns: string[], tsv: string): Promise<number>
}

export function postgresStore(pool: pg.Pool): RawStore {
  return {
    kind: 'postgres',
    label: 'PostgreSQL',
    query: async <R>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as R[],
    async timed(sql, params = []) {
      const start = performance.now()
      await pool.query(sql, params)
      return performance.now() - start
    },
    async timedInTx(before, timed) {
      const client = await pool.connect()
      try {
        await client.query('BEGIN')
        for (const s of before) await client.query(s.sql, s.params ?? [])
        const start = performance.now()
        await client.query(timed.sql, timed.params ?? [])
        return performance.now() - start
      } finally {
        await client.query('ROLLBACK').catch(() => undefined)
        client.release()
      }
    },
    async copy(table, columns, tsv) {
      const client = await pool.connect()
      try {
        const start = performance.now()
        await pipeline(Readable.from([tsv]), client.query(copyFrom(`COPY ${table} (${columns.join(', ')}) FROM STDIN`)))
        return performance.now() - start
      } finally {
        client.release()
      }
    },
  }
}

export function pgliteStore(rawUrl: string): RawStore {
  const post = async <T>(path: string, body: unknown): Promise<T> => {
    const res = await fetch(`${rawUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`bench: raw ${path} answered ${res.status}: ${text.slice(0, 500)}`)
    return JSON.parse(text) as T
  }
  return {
    kind: 'pglite',
    label: 'PGlite',
    query: async <R>(sql: string, params: unknown[] = []) => (await post<{ rows: R[] }>('/sql', { sql, params })).rows,
    timed: async (sql, params = []) => (await post<{ ms: number }>('/sql', { sql, params })).ms,
    timedInTx: async (before, timed) => (await post<{ ms: number }>('/tx', { before, timed })).ms,
    copy: async (table, columns, tsv) => (await post<{ ms: number }>('/copy', { sql: `COPY ${table} (${columns.join(', ')}) FROM '/dev/blob'`, data: tsv })).ms,
  }
}
