import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDb, type Db } from '../../src/store/db.js'
import { PREPARED_PER_CONNECTION } from '../../src/store/postgres-db.js'
import { STORES } from '../helpers/stores.js'

/**
 * QueryOptions.prepare = true (decision 0021): generated statements whose text repeats (list and
 * search pages) are prepared per connection under a name derived from their text, at most
 * PREPARED_PER_CONNECTION of them, and stay correct when the tables they read change.
 * One connection (poolSize 1), so that what the tests read from pg_prepared_statements is the
 * connection the statements ran on.
 */
describe.runIf(STORES.includes('postgres'))('postgres: generated statements prepared per connection', () => {
  const url = process.env.TEST_DATABASE_URL!
  const schema = `t_${randomBytes(6).toString('hex')}`
  let db: Db

  const held = async () =>
    (await db.query<{ name: string; statement: string }>(`SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'kbis_q_%' ORDER BY name`)).rows

  beforeAll(async () => {
    const admin = new pg.Client(url)
    await admin.connect()
    await admin.query(`CREATE SCHEMA ${schema}`)
    await admin.end()
    db = await openDb({ databaseUrl: url, schema, poolSize: 1 })
    await db.query('CREATE TABLE things (id int PRIMARY KEY, n int NOT NULL)')
    await db.query('INSERT INTO things SELECT i, i * 10 FROM generate_series(1, 20) AS i')
  })
  afterAll(async () => {
    await db?.close()
    const admin = new pg.Client(url)
    await admin.connect()
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.end()
  })

  it('prepares a statement once and runs it with each call’s values', async () => {
    const sql = 'SELECT n FROM things WHERE id = $1'
    expect((await db.query<{ n: number }>(sql, [3], { prepare: true })).rows).toEqual([{ n: 30 }])
    expect((await db.query<{ n: number }>(sql, [7], { prepare: true })).rows).toEqual([{ n: 70 }])
    const statements = await held()
    expect(statements).toHaveLength(1)
    expect(statements[0]!.statement).toBe(sql)
    expect(statements[0]!.name).toMatch(/^kbis_q_[A-Za-z0-9_-]{32}$/)
  })

  it(`keeps at most ${PREPARED_PER_CONNECTION} per connection, and every statement answers right past it`, async () => {
    await db.query('SELECT n FROM things WHERE id = $1', [1], { prepare: 'kbis_fixed_name' })
    for (let i = 0; i < PREPARED_PER_CONNECTION + 5; i++) {
      const { rows } = await db.query<{ n: number; k: number }>(`SELECT n, ${i} AS k FROM things WHERE id = $1`, [(i % 20) + 1], { prepare: true })
      expect(rows).toEqual([{ n: ((i % 20) + 1) * 10, k: i }])
    }
    const count = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0]!.n
    expect(count).toBeGreaterThan(0)
    expect(count).toBeLessThanOrEqual(PREPARED_PER_CONNECTION)
    // The connection forgot everything once (DEALLOCATE ALL), the fixed names too: they are prepared again.
    expect((await db.query<{ n: number }>('SELECT n FROM things WHERE id = $1', [2], { prepare: 'kbis_fixed_name' })).rows).toEqual([{ n: 20 }])
  })

  it('answers the new type after a column it returns changed type, instead of failing on every run', async () => {
    const sql = 'SELECT n FROM things WHERE id = $1'
    expect((await db.query<{ n: unknown }>(sql, [4], { prepare: true })).rows).toEqual([{ n: 40 }])
    await db.query('ALTER TABLE things ALTER COLUMN n TYPE text USING n::text')
    expect((await db.query<{ n: unknown }>(sql, [4], { prepare: true })).rows).toEqual([{ n: '40' }])
    expect((await db.query<{ n: unknown }>(sql, [5], { prepare: true })).rows).toEqual([{ n: '50' }])
  })

  it('prepares a statement again when the server forgot it behind the driver’s back (DISCARD ALL, a pooler)', async () => {
    const sql = 'SELECT id FROM things WHERE id = $1'
    expect((await db.query<{ id: number }>(sql, [6], { prepare: true })).rows).toEqual([{ id: 6 }])
    expect((await db.query<{ id: number }>(sql, [7], { prepare: 'kbis_fixed_id' })).rows).toEqual([{ id: 7 }])
    await db.query('DISCARD ALL')
    expect(await held()).toEqual([])
    expect((await db.query<{ id: number }>(sql, [8], { prepare: true })).rows).toEqual([{ id: 8 }])
    expect((await held()).map((s) => s.statement)).toEqual([sql])
    // A fixed name takes the same path.
    expect((await db.query<{ id: number }>(sql, [9], { prepare: 'kbis_fixed_id' })).rows).toEqual([{ id: 9 }])
  })

  it('reports a statement’s own error and keeps the connection', async () => {
    await expect(db.query('SELECT 1 / $1::int AS q FROM things WHERE id = 1', [0], { prepare: true })).rejects.toMatchObject({ code: '22012' })
    expect((await db.query<{ q: number }>('SELECT 10 / $1::int AS q FROM things WHERE id = 1', [5], { prepare: true })).rows).toEqual([{ q: 2 }])
    const pid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid
    await expect(db.query('SELECT 1 / $1::int AS q', [0], { prepare: true })).rejects.toMatchObject({ code: '22012' })
    expect((await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid).toBe(pid)
  })
})
