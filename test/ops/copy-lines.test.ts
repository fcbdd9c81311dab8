import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'

/**
 * Db.copyLines (store/copy.ts): COPY … TO STDOUT of a SELECT with parameters, which COPY does not
 * take. The lines must be the rows of the same SELECT run with bind parameters, whatever the
 * values hold.
 */
describe.runIf(STORES.includes('postgres'))('postgres: lines by COPY (Db.copyLines)', () => {
  let store: TestStore
  const HOSTILE = [
    `it's'); DROP TABLE things; --`,
    'back\\slash \\x01 and E\'\\\\\'',
    'line\nbreak\r\nand "quotes"',
    'control \u0001 \u0002 chars',
    'a $1 and $2 inside',
    'ünïcødé ✓ 🚀',
  ]

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await store.db.query(`CREATE TABLE things (id uuid PRIMARY KEY, name text NOT NULL, n numeric, tags text[] NOT NULL, doc jsonb NOT NULL, flag boolean)`)
    await store.db.query(
      `INSERT INTO things SELECT ('00000000-0000-7000-8000-' || lpad(i::text, 12, '0'))::uuid, ($1::text[])[i + 1], i * 1.5, ARRAY['t' || (i % 3)], jsonb_build_object('k', ($1::text[])[i + 1], 'i', i), i % 2 = 0
       FROM generate_series(0, 5) AS i`, [HOSTILE])
  })
  afterAll(async () => store?.drop())

  // The name as JSON (never a raw tab), a tab, the rest.
  const LINE = `to_json(t.name)::text || E'\\t' || t.n || ' ' || t.doc::text`
  const nameOf = (line: string) => JSON.parse(line.slice(0, line.indexOf('\t'))) as string
  const copy = async (where: string, params: unknown[], limit = '') => Buffer.concat(await store.db.copyLines!(`SELECT ${LINE} FROM things t WHERE ${where} ORDER BY t.id ${limit}`, params))
  const rows = async (where: string, params: unknown[], limit = '') =>
    (await store.db.query<{ line: string }>(`SELECT ${LINE} AS line FROM things t WHERE ${where} ORDER BY t.id ${limit}`, params)).rows.map((r) => `${r.line}\n`).join('')

  it('answers the rows of the same SELECT with bind parameters, byte for byte', async () => {
    const out = await copy('t.id > $1::uuid', ['00000000-0000-7000-8000-000000000000'])
    expect(out).toBeInstanceOf(Buffer)
    expect(out.toString('utf8')).toBe(await rows('t.id > $1::uuid', ['00000000-0000-7000-8000-000000000000']))
    expect(out.toString('utf8').split('\n')).toHaveLength(6)
    expect(nameOf(out.toString('utf8'))).toBe(HOSTILE[1])
  })

  it('keeps every value a value: each hostile name matches itself and nothing else', async () => {
    for (const [i, name] of HOSTILE.entries()) {
      const out = (await copy('t.name = $1', [name])).toString('utf8')
      expect(out).toBe(await rows('t.name = $1', [name]))
      expect(out.split('\n').filter(Boolean)).toHaveLength(1)
      expect(nameOf(out)).toBe(HOSTILE[i])
    }
    expect((await store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM things')).rows[0]!.n).toBe(6)
  })

  it('gives each parameter the type PostgreSQL infers for it: numeric, text[], jsonb, boolean, bigint, null', async () => {
    const where = `t.n >= $1 AND t.tags && $2::text[] AND t.doc @> $3::jsonb AND t.flag = $4 AND ($5::text IS NULL OR t.name = $5)`
    const params = [1.5, ['t1', 't2'], JSON.stringify({}), true, null, 2]
    const out = (await copy(where, params, 'LIMIT $6')).toString('utf8')
    expect(out).toBe(await rows(where, params, 'LIMIT $6'))
    expect(out.split('\n').filter(Boolean).map(nameOf)).toEqual([HOSTILE[2], HOSTILE[4]])
  })

  it('answers an empty buffer when nothing matches', async () => {
    expect((await copy('t.name = $1', ['nobody'])).length).toBe(0)
    expect(await store.db.copyLines!(`SELECT 'x' WHERE false`, [])).toEqual([])
  })

  it('fails as the query fails, and leaves its connections usable', async () => {
    await expect(copy('t.n = $1', ['not a number'])).rejects.toMatchObject({ code: '22P02' })
    await expect(copy('t.nope = $1', ['x'])).rejects.toMatchObject({ code: '42703' })
    // Every pooled connection again (5): nothing left prepared, no transaction left open.
    const again = await Promise.all(Array.from({ length: 8 }, () => copy('t.name = $1', [HOSTILE[0]])))
    for (const out of again) expect(out.toString('utf8')).toBe(await rows('t.name = $1', [HOSTILE[0]]))
  })
})

describe.runIf(STORES.includes('pglite'))('pglite: no lines by COPY', () => {
  it('leaves copyLines out (PGlite writes a COPY to one file at once): callers read rows', async () => {
    const store = await createTestStore('pglite')
    try {
      expect(store.db.copyLines).toBeUndefined()
    } finally {
      await store.drop()
    }
  })
})
