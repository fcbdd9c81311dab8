import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDb, type Db } from '../../../src/store/db.js'
import { ISO_SECOND, type StoreDate } from '../../../src/store/timestamps.js'

/**
 * PGlite in a thread of its own (decision 0025): what crosses between the threads must arrive as
 * it did when PGlite ran in the server's thread, and the server's thread must stay free while a
 * statement runs.
 */
describe('pglite: the store in its own thread', { timeout: 60_000 }, () => {
  let db: Db
  beforeAll(async () => {
    db = await openDb({ dataDir: 'memory://' })
    await db.query('CREATE TABLE t (k text PRIMARY KEY, at timestamptz, ats timestamptz[], n int8, doc jsonb)')
  })
  afterAll(async () => db.close())

  it('hands over rows as objects, timestamptz as Dates that keep their ISO text, int8 and jsonb as values', async () => {
    await db.query(`INSERT INTO t VALUES ('a', '2026-01-31 09:15:00.5+00', ARRAY['2026-02-01 10:00:00+00']::timestamptz[], 42, '{"x": [1, "y"]}')`)
    const { rows } = await db.query<{ k: string; at: StoreDate; ats: Date[]; n: number; doc: unknown; same: string }>('SELECT k, at, ats, n, doc, k AS same FROM t')
    expect(rows).toHaveLength(1)
    const row = rows[0]!
    expect(Object.keys(row)).toEqual(['k', 'at', 'ats', 'n', 'doc', 'same'])
    expect(row.at).toBeInstanceOf(Date)
    expect(row.at.toISOString()).toBe('2026-01-31T09:15:00.500Z')
    expect(row.at[ISO_SECOND]).toBe('2026-01-31T09:15:00Z')
    expect(row.ats.map((d) => d.toISOString())).toEqual(['2026-02-01T10:00:00.000Z'])
    expect(row).toMatchObject({ k: 'a', n: 42, doc: { x: [1, 'y'] }, same: 'a' })
  })

  it('keeps PostgreSQL\'s fields on an error (code, constraint, detail), not the statement\'s parameters', async () => {
    const err = await db.query('INSERT INTO t (k) VALUES ($1)', ['a']).catch((e: unknown) => e as Record<string, unknown>)
    expect(err).toBeInstanceOf(Error)
    expect(err).toMatchObject({ code: '23505', constraint: 't_pkey', detail: 'Key (k)=(a) already exists.', message: 'duplicate key value violates unique constraint "t_pkey"' })
    expect(err).not.toHaveProperty('params')
  })

  it('rolls a transaction back when its function throws, and commits what the next one writes', async () => {
    await expect(db.transaction(async (tx) => {
      await tx.query("INSERT INTO t (k) VALUES ('rolled')")
      throw new Error('changed my mind')
    })).rejects.toThrow('changed my mind')
    await db.transaction(async (tx) => void (await tx.query("INSERT INTO t (k) VALUES ('kept')")))
    expect((await db.query<{ k: string }>("SELECT k FROM t WHERE k IN ('rolled', 'kept')")).rows).toEqual([{ k: 'kept' }])
  })

  it('refuses a parameter that cannot cross to the thread, and goes on', async () => {
    await expect(db.query('SELECT $1::text AS x', [() => 1])).rejects.toThrow(/could not be cloned/)
    expect((await db.query<{ x: string }>('SELECT $1::text AS x', ['ok'])).rows).toEqual([{ x: 'ok' }])
  })

  it('leaves the server\'s thread free while a statement runs', async () => {
    let ticks = 0
    const timer = setInterval(() => ticks++, 10)
    try {
      await db.query('SELECT pg_sleep(0.5)')
    } finally {
      clearInterval(timer)
    }
    // In the server's thread the statement would hold the loop for its 500 ms: no tick at all.
    expect(ticks).toBeGreaterThanOrEqual(20)
  })

  it('fails every call once its thread has ended, with a message that says so, and does not hang', async () => {
    const other = await openDb({ dataDir: 'memory://' })
    await (other as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread.worker.terminate()
    await expect(other.query('SELECT 1')).rejects.toThrow(/^the embedded store stopped/)
    await expect(other.transaction(async (tx) => tx.query('SELECT 1'))).rejects.toThrow(/^the embedded store stopped/)
    await other.close()
  })
})
