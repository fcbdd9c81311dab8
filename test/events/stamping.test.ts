import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createNoteAssets, createTestApp, readFeed, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import type { StampedEvent } from '../../src/events/relay.js'

/**
 * How events get their positions (decisions 0003, 0018, 0027): stamped by the relay after commit
 * on PostgreSQL, given when written on PGlite (whose transactions run one after the other), where
 * the relay only hands them to its hooks, each organization's above its mark. Either way a bulk's
 * events follow its items, and positions are the organization's own.
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

    it(store === 'pglite' ? 'gives it when the event is written: in the store at commit, in item order' : 'leaves it to the relay, which stamps in item order', async () => {
      expect(t.app.events.stamping).toBe(store === 'pglite' ? 'written' : 'stamp')
      expect(await sequenceDefault(t)).toBe(null)
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

    const highest = async (): Promise<number> =>
      Number((await t.store.db.query<{ n: string }>('SELECT max(sequence) AS n FROM events WHERE org_id = $1', [t.orgId])).rows[0]!.n)

    it('gives a position to events written without one (a copy of a PostgreSQL store), in id order, and hands them over once', async () => {
      // On PGlite, as a copy of a PostgreSQL store taken before its relay stamped these events
      // (written without a position, in a transaction that moved no mark).
      await t.app.events.flush()
      const before = await highest()
      const ids = await createNotes('legacy', 5)
      if (store === 'pglite') {
        await t.store.db.query('UPDATE events SET sequence = NULL WHERE asset_id = ANY($1::uuid[])', [ids])
        await t.store.db.query(`INSERT INTO event_handover_marks (org_id, handed_through) VALUES ($1, $2)
           ON CONFLICT (org_id) DO UPDATE SET handed_through = EXCLUDED.handed_through`, [t.orgId, before])
      }
      if (store === 'pglite') expect(await positionsOf(t, ids)).toEqual([null, null, null, null, null])
      handed.length = 0
      await t.app.events.prepare()
      await t.app.events.flush()
      // The organization's next positions, in item order.
      const positions = await positionsOf(t, ids)
      expect(positions).toEqual(positions.map((_, i) => before + 1 + i))
      expect(handed.flat().map((e) => e.event.subject)).toEqual(ids.map((id) => `assets/${id}`))
      // Nothing is handed over twice.
      handed.length = 0
      await t.app.events.flush()
      expect(handed.flat()).toEqual([])
      // kbis_events_pending: nothing left to stamp or to hand over.
      expect(await t.app.events.pendingCount()).toBe(0)
    })

    if (store === 'pglite') {
      it("hands over each organization's events above its own mark, once, in position order", async () => {
        await t.app.events.flush()
        const ids = await createNotes('again', 4)
        await t.app.events.flush()
        const positions = await positionsOf(t, ids)
        // As after a crash between the commit and the hand-over: the mark below these four.
        await t.store.db.query('UPDATE event_handover_marks SET handed_through = $2 WHERE org_id = $1', [t.orgId, positions[0]! - 1])
        expect(await t.app.events.pendingCount()).toBe(4)
        handed.length = 0
        await t.app.events.flush()
        expect(handed.flat().map((e) => [e.event.subject, Number(e.event.sequence)])).toEqual(ids.map((id, i) => [`assets/${id}`, positions[i]]))
        handed.length = 0
        await t.app.events.flush()
        expect(handed.flat()).toEqual([])
        expect(await t.app.events.pendingCount()).toBe(0)
      })
    }

    it("drops the default an earlier version's store carries (positions drawn store-wide)", async () => {
      await t.store.db.query("ALTER TABLE events ALTER COLUMN sequence SET DEFAULT nextval('event_sequence')")
      await t.app.events.prepare()
      expect(await sequenceDefault(t)).toBe(null)
      const before = await highest()
      const ids = await createNotes('after', 3)
      await t.app.events.flush()
      const positions = await positionsOf(t, ids)
      expect(positions).toEqual(positions.map((_, i) => before + 1 + i))
    })

    it("numbers each organization's events on their own: another organization's writes leave no gap", async () => {
      const beta = structuredClone(ACME) as typeof ACME
      beta.organization = { ...beta.organization, key: 'beta' }
      await applySetup(t.store.db, beta as unknown as SetupFile)
      const betaKey = await t.givenKey({ type: 'Admin', org: 'beta' })
      const createAs = async (key: string, prefix: string, n: number): Promise<void> => {
        const items = Array.from({ length: n }, (_, i) => ({ asset_type_key: 'note', name: `${prefix}-${i}` }))
        expect((await t.request('POST', '/api/v1/bulk/assets', { key, body: items })).status).toBe(201)
      }
      const acmeStart = (await readFeed(t, null)).cursor
      // Interleaved, and concurrently: the two organizations' writes and the relay's rounds mix.
      for (let round = 0; round < 3; round++) {
        await Promise.all([createAs(t.adminKey, `acme-${round}`, 3), createAs(betaKey, `beta-${round}`, 2), createAs(t.adminKey, `acme-x${round}`, 1)])
      }
      const acme = (await readFeed(t, acmeStart)).events.map((e) => Number(e.sequence))
      const betaFeed = (await readFeed(t, null, '', betaKey)).events
      const betaPositions = betaFeed.map((e) => Number(e.sequence))
      expect(acme).toHaveLength(12)
      expect(acme).toEqual(acme.map((_, i) => acme[0]! + i))
      // beta's feed: the key's api_key.created from its setup, then its 6 assets, numbered 1, 2, 3, …
      expect(betaFeed.filter((e) => e.type === 'asset.created')).toHaveLength(6)
      expect(betaPositions).toEqual(betaPositions.map((_, i) => i + 1))
      // The hooks (webhooks, NATS) got each of beta's events once, in its order.
      await t.app.events.flush()
      const betaHanded = handed.flat().filter((e) => e.orgKey === 'beta').map((e) => Number(e.event.sequence))
      expect(betaHanded.slice(-6)).toEqual(betaPositions.slice(-6))
      expect(new Set(betaHanded).size).toBe(betaHanded.length)
    })

  })
}
