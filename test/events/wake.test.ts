import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestStore, STORES } from '../helpers/stores.js'
import { createNoteAssets, createTestApp, type TestApp } from '../helpers/app.js'
import { BACKGROUND_SQL } from '../../src/store/db.js'
import { takeRelayLock } from '../../src/events/relay-sql.js'

/**
 * The relay is woken by the commits of this process that wrote events, and by nothing else of a
 * request: a search, an analytics query, a refused write or a dry run (all POSTs) cost the store
 * no relay statement. The poll is set to a minute here, so whatever the relay does within the
 * test was woken.
 */
for (const store of STORES) {
  describe(`${store}: what wakes the event relay`, () => {
    let t: TestApp
    const relayStatements: string[] = []
    const committedOrgs: string[] = []

    beforeAll(async () => {
      t = await createTestApp(store, undefined, { eventRelayIntervalMs: 60_000 })
      await t.app.events.flush()
      t.app.events.onCommitted((_events, orgIds) => void committedOrgs.push(...orgIds))
      const db = t.store.db
      const query = db.query.bind(db)
      // The relay's first statement of every round: is anything waiting?
      db.query = ((sql: string, ...rest: unknown[]) => {
        if (sql.startsWith(BACKGROUND_SQL) && /sequence IS NULL|handed_through/.test(sql)) relayStatements.push(sql)
        return (query as (...a: unknown[]) => unknown)(sql, ...rest)
      }) as typeof db.query
    })
    afterAll(async () => t.close())

    const until = async (what: () => boolean, ms = 3000): Promise<boolean> => {
      const end = Date.now() + ms
      while (!what() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10))
      return what()
    }

    it('runs nothing for requests that write nothing, POSTs included', async () => {
      await createNoteAssets(t, 'before', 2)
      await t.app.events.flush()
      relayStatements.length = 0
      for (let i = 0; i < 5; i++) {
        const search = await t.request('POST', '/api/v1/search/assets', { body: { filter: { field: 'name', operator: 'starts_with', value: 'before' } } })
        expect(search.status).toBe(200)
        expect(search.body.data).toHaveLength(2)
      }
      const analytics = await t.request('POST', '/api/v1/analytics/assets', { body: { measures: [{ type: 'count' }] } })
      expect(analytics.status).toBe(200)
      const refused = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: '' } })
      expect(refused.status).toBe(422)
      const dryRun = await t.request('POST', '/api/v1/assets?dry_run=true', { body: { asset_type_key: 'note', name: 'dry' } })
      expect(dryRun.status).toBe(200)
      expect(dryRun.body.meta).toEqual({ dry_run: true, items: 1 })
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(relayStatements).toEqual([])
    })

    it('hands a write\'s events on soon after its commit, without waiting for the poll', async () => {
      relayStatements.length = committedOrgs.length = 0
      const [id] = await createNoteAssets(t, 'woken', 1)
      expect(await until(() => committedOrgs.includes(t.orgId))).toBe(true)
      expect(relayStatements.length).toBeGreaterThan(0)
      // In the feed without a flush: stamped (PostgreSQL) or handed over (PGlite) by that round.
      const feed = (await t.request('GET', '/api/v1/events?page[size]=1000')).body.data
      expect(feed.filter((e: { subject: string }) => e.subject === `assets/${id}`).map((e: { type: string }) => e.type)).toEqual(['asset.created'])
    })

    if (store === 'postgres') {
      it('is not held up by the relay of a store in another schema of the same database', async () => {
        const other = await createTestStore('postgres')
        try {
          relayStatements.length = committedOrgs.length = 0
          // As that store's relay holds its lock while it stamps (a flush waits for it).
          await other.db.transaction(async (tx) => {
            await takeRelayLock(tx, true)
            await createNoteAssets(t, 'beside', 1)
            expect(await until(() => committedOrgs.includes(t.orgId))).toBe(true)
          })
        } finally {
          await other.drop()
        }
      })
    }

    it(store === 'pglite' ? 'gathers the commits of a burst into few rounds (PGlite)' : 'stamps every commit of a burst', async () => {
      await t.app.events.flush()
      const rounds: number[] = []
      t.app.events.onCommitted((events, orgIds) => void rounds.push(orgIds.length))
      const before = (await t.request('GET', '/api/v1/events?page[size]=1000')).body.data.length
      const created = await Promise.all(Array.from({ length: 10 }, (_, i) =>
        t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: `burst-${i}` } })))
      expect(created.map((r) => r.status)).toEqual(Array(10).fill(201))
      // In the feed at once, whatever the rounds: read right after the writes.
      const feed = (await t.request('GET', '/api/v1/events?page[size]=1000')).body.data
      expect(feed.length - before).toBe(10)
      await t.app.events.flush()
      expect(rounds.length).toBeGreaterThan(0)
      // PGlite: one round per 20 ms window, not one per commit; PostgreSQL stamps each at once.
      if (store === 'pglite') expect(rounds.length).toBeLessThanOrEqual(5)
    })
  })
}
