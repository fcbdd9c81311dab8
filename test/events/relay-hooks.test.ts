import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createNoteAssets, createTestApp, type TestApp } from '../helpers/app.js'
import type { StampedEvent } from '../../src/events/relay.js'

/**
 * The relay returns the events it stamps whole only when something wants them (a hook without a
 * `wants` predicate, one whose predicate says yes, or a NATS sink); otherwise ids only, and the
 * hooks get the batch's organizations without events. Either way every event is stamped.
 */
for (const store of STORES) {
  describe(`${store}: what the relay hands its hooks`, () => {
    let t: TestApp
    const stamped: { events: StampedEvent[]; orgIds: readonly string[] }[] = []
    const committed: { events: StampedEvent[]; orgIds: readonly string[] }[] = []
    let wanted = false
    const asked: (readonly string[])[] = []

    beforeAll(async () => {
      t = await createTestApp(store)
      await t.app.events.flush()
      t.app.events.onStamped(async (_tx, events, orgIds) => void stamped.push({ events, orgIds }), async (_tx, orgIds) => {
        asked.push(orgIds)
        return wanted
      })
      t.app.events.onCommitted((events, orgIds) => void committed.push({ events, orgIds }))
    })
    afterAll(async () => t.close())

    const createNotes = (prefix: string, n: number) => createNoteAssets(t, prefix, n)
    const feedOf = async (ids: string[]) => {
      const res = await t.request('GET', '/api/v1/events?page[size]=1000')
      return res.body.data.filter((e: { subject: string }) => ids.includes(e.subject.replace('assets/', '')))
    }

    it('stamps ids only when no hook wants the events, and says which organizations they were of', async () => {
      stamped.length = committed.length = asked.length = 0
      const ids = await createNotes('narrow', 3)
      await t.app.events.flush()
      expect(asked).toContainEqual([t.orgId])
      expect(stamped.flatMap((s) => s.events)).toEqual([])
      expect(stamped.flatMap((s) => s.orgIds)).toEqual([t.orgId])
      expect(committed).toEqual([{ events: [], orgIds: [t.orgId] }])
      // Stamped all the same: in the feed, in order.
      const feed = await feedOf(ids)
      expect(feed.map((e: { type: string }) => e.type)).toEqual(['asset.created', 'asset.created', 'asset.created'])
      const positions = feed.map((e: { sequence: number }) => Number(e.sequence))
      expect(positions).toEqual([...positions].sort((a, b) => a - b))
    })

    it('hands the events whole to every hook once one wants them', async () => {
      stamped.length = committed.length = 0
      wanted = true
      const ids = await createNotes('whole', 2)
      await t.app.events.flush()
      const events = stamped.flatMap((s) => s.events)
      expect(events.map((e) => e.event.type)).toEqual(['asset.created', 'asset.created'])
      expect(events.map((e) => e.event.subject)).toEqual(ids.map((id) => `assets/${id}`))
      expect(events.map((e) => e.orgId)).toEqual([t.orgId, t.orgId])
      expect(events.every((e) => e.orgKey === 'acme' && typeof e.event.data === 'object')).toBe(true)
      expect(committed.flatMap((c) => c.events)).toEqual(events)
      expect(committed.flatMap((c) => c.orgIds)).toEqual([t.orgId])
    })
  })
}
