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
}
