import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createNoteAssets, createTestApp, type TestApp } from '../helpers/app.js'
import type { StampedEvent } from '../../src/events/relay.js'

/**
 * How events get their positions (decisions 0003, 0018): stamped by the relay after commit on
 * PostgreSQL, drawn when written on PGlite (whose transactions run one after the other), where the
 * relay only hands them to its hooks. Either way a bulk's events follow its items.
 */
const sequenceDefault = async (t: TestApp): Promise<string | null> =>
  (await t.store.db.query<{ expr: string | null }>(
    `SELECT pg_get_expr(d.adbin, d.adrelid) AS expr FROM pg_attribute a
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = 'events'::regclass AND a.attname = 'sequence'`)).rows[0]!.expr

const positionsOf = async (t: TestApp, ids: string[]): Promise<(number | null)[]> => {
  const rows = (await t.store.db.query<{ asset_id: string; sequence: string | null }>(
    'SELECT asset_id, sequence FROM events WHERE asset_id = ANY($1::uuid[])', [ids])).rows
  const byAsset = new Map(rows.map((r) => [r.asset_id, r.sequence === null ? null : Number(r.sequence)]))
  return ids.map((id) => byAsset.get(id) ?? null)
}

for (const store of STORES) {
  describe(`${store}: where an event's position comes from`, () => {
    let t: TestApp
    const handed: StampedEvent[][] = []
    beforeAll(async () => {
      t = await createTestApp(store)
      t.app.events.onStamped(async (_tx, events) => void handed.push(events), async () => true)
    })
    afterAll(async () => t.close())

    const createNotes = (prefix: string, n: number) => createNoteAssets(t, prefix, n)

    it(store === 'pglite' ? 'draws it when the event is written: in the store at commit, in item order' : 'leaves it to the relay, which stamps in item order', async () => {
      expect(t.app.events.stamping).toBe(store === 'pglite' ? 'written' : 'stamp')
      expect(await sequenceDefault(t)).toBe(store === 'pglite' ? "nextval('event_sequence'::regclass)" : null)
      const ids = await createNotes('order', 40)
      if (store === 'pglite') {
        // No relay round has run on the one thread since the response: the positions came with the rows.
        const positions = await positionsOf(t, ids)
        expect(positions.every((p) => p !== null)).toBe(true)
        expect(positions).toEqual(positions.map((_, i) => positions[0]! + i))
      }
      await t.app.events.flush()
      const positions = await positionsOf(t, ids)
      expect(positions).toEqual(positions.map((_, i) => positions[0]! + i))
      // The feed answers them in that order, and the hooks got each of them once.
      const feed = (await t.request('GET', '/api/v1/events?page[size]=1000')).body.data
        .filter((e: { subject: string }) => ids.includes(e.subject.slice('assets/'.length)))
      expect(feed.map((e: { subject: string }) => e.subject)).toEqual(ids.map((id) => `assets/${id}`))
      const hooked = handed.flat().filter((e) => ids.includes(e.event.subject.slice('assets/'.length)))
      expect(hooked.map((e) => e.event.sequence)).toEqual(positions.map(String))
    })

    it('gives a position to events written without one (a copy of another store, an earlier version), in id order, and hands them over once', async () => {
      // As a store written before decision 0018 (or copied from PostgreSQL): no default, events unstamped.
      await t.app.events.flush()
      await t.store.db.query('ALTER TABLE events ALTER COLUMN sequence DROP DEFAULT')
      const ids = await createNotes('legacy', 5)
      if (store === 'pglite') expect(await positionsOf(t, ids)).toEqual([null, null, null, null, null])
      handed.length = 0
      await t.app.events.prepare()
      expect(await sequenceDefault(t)).toBe(store === 'pglite' ? "nextval('event_sequence'::regclass)" : null)
      await t.app.events.flush()
      const positions = await positionsOf(t, ids)
      expect(positions).toEqual(positions.map((_, i) => positions[0]! + i))
      expect(handed.flat().map((e) => e.event.subject)).toEqual(ids.map((id) => `assets/${id}`))
      // Nothing is handed over twice.
      handed.length = 0
      await t.app.events.flush()
      expect(handed.flat()).toEqual([])
      // kbis_events_pending: nothing left to stamp or to hand over.
      expect(await t.app.events.pendingCount()).toBe(0)
    })

    it(store === 'pglite' ? 'sets the default back on a store that lost it' : 'drops a default a store copied from PGlite carries (it would draw positions out of commit order)', async () => {
      await t.store.db.query(store === 'pglite'
        ? 'ALTER TABLE events ALTER COLUMN sequence DROP DEFAULT'
        : "ALTER TABLE events ALTER COLUMN sequence SET DEFAULT nextval('event_sequence')")
      await t.app.events.prepare()
      expect(await sequenceDefault(t)).toBe(store === 'pglite' ? "nextval('event_sequence'::regclass)" : null)
      const ids = await createNotes('after', 3)
      await t.app.events.flush()
      const positions = await positionsOf(t, ids)
      expect(positions).toEqual(positions.map((_, i) => positions[0]! + i))
    })
  })
}
