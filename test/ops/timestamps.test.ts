import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ISO_SECOND, type StoreDate } from '../../src/store/timestamps.js'
import { isoSecond } from '../../src/core/time.js'

/** timestamptz values read from either store: Dates of the right instant, their second kept. */
for (const kind of STORES) {
  describe(`${kind}: timestamptz values`, () => {
    let store: TestStore
    beforeAll(async () => { store = await createTestStore(kind) })
    afterAll(async () => store?.drop())

    it('come as Dates that carry their ISO second (the session speaks UTC)', async () => {
      const { rows } = await store.db.query<{ t: StoreDate; n: StoreDate }>(`SELECT '2026-01-31 10:15:07.5+01'::timestamptz AS t, now() AS n`)
      expect(rows[0]!.t).toBeInstanceOf(Date)
      expect(rows[0]!.t.toISOString()).toBe('2026-01-31T09:15:07.500Z')
      expect(rows[0]!.t[ISO_SECOND]).toBe('2026-01-31T09:15:07Z')
      expect(isoSecond(rows[0]!.n)).toBe(`${rows[0]!.n.toISOString().slice(0, 19)}Z`)
    })

    it('are the same instants in a session of another time zone', async () => {
      const t = await store.db.transaction(async (tx) => {
        await tx.query(`SET LOCAL TimeZone = 'Asia/Kolkata'`)
        return (await tx.query<{ t: StoreDate }>(`SELECT '2026-01-31 09:15:07.5+00'::timestamptz AS t`)).rows[0]!.t
      })
      expect(t.toISOString()).toBe('2026-01-31T09:15:07.500Z')
      expect(isoSecond(t)).toBe('2026-01-31T09:15:07Z')
    })
  })

  describe(`${kind}: rows read as one JSON document (QueryOptions.jsonRows)`, () => {
    let store: TestStore
    beforeAll(async () => { store = await createTestStore(kind) })
    afterAll(async () => store?.drop())

    const READ = `SELECT v.id, v.name, v.doc, v.tags, v.flag, v.n, v.at, v.none FROM (VALUES
        ('01a2a000-0000-7000-8000-000000000002'::uuid, 'b "quoted" \\ name', '{"z": 1, "a": [1, {"b": null}], "big": 12345678901234}'::jsonb,
         ARRAY['x', 'y,z']::text[], true, 7::int, '2026-01-31 10:15:07.5+01'::timestamptz, NULL::text),
        ('01a2a000-0000-7000-8000-000000000001'::uuid, 'ünïcødé ✓', '{}'::jsonb, ARRAY[]::text[], false, -1::int, '1999-12-31 23:59:59+00'::timestamptz, NULL::text)
      ) AS v(id, name, doc, tags, flag, n, at, none) ORDER BY v.id DESC`

    it('are the rows of the plain read: same values, same types, same order', async () => {
      const plain = (await store.db.query<Record<string, unknown>>(READ)).rows
      const json = await store.db.query<Record<string, unknown>>(READ, [], { jsonRows: { timestamps: ['at'] } })
      expect(json.rowCount).toBe(2)
      expect(json.rows).toEqual(plain)
      expect(json.rows.map((r) => r.name)).toEqual(['b "quoted" \\ name', 'ünïcødé ✓'])
      const at = json.rows[0]!.at as StoreDate
      expect(at).toBeInstanceOf(Date)
      expect(at.toISOString()).toBe('2026-01-31T09:15:07.500Z')
      expect(at[ISO_SECOND]).toBe('2026-01-31T09:15:07Z')
      expect(Object.keys(json.rows[0]!.doc as object)).toEqual(Object.keys(plain[0]!.doc as object))
    })

    it('are no rows as an empty list, in a transaction too, with parameters', async () => {
      const rows = await store.db.transaction((tx) => tx.query(`${READ.replace('ORDER BY', 'WHERE v.n > $1 ORDER BY')}`, [100], { jsonRows: { timestamps: ['at'] } }))
      expect(rows).toEqual({ rows: [], rowCount: 0 })
    })
  })
}
