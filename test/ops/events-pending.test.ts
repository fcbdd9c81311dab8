import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { startMetricsServer } from '../../src/ops/metrics-server.js'

/**
 * kbis_events_pending is counted when the metrics are read, not left at what the relay's last
 * round saw: events that no round has handed on yet show up in the next scrape.
 */
/** `n` events written by SQL, as a command of another process would: nothing wakes a relay. */
const writeRawEvents = (t: TestApp, n: number) => t.store.db.query(
  `INSERT INTO events (org_id, id, type, subject, time, data)
   SELECT $1, gen_random_uuid(), 'asset.created', 'assets/' || gen_random_uuid(), now(), '{}'::jsonb FROM generate_series(1, $2::int)`,
  [t.orgId, n])

for (const store of STORES) {
  describe(`${store}: kbis_events_pending`, () => {
    let t: TestApp
    // A poll of a minute: only a flush hands events on during the test.
    beforeAll(async () => { t = await createTestApp(store, undefined, { eventRelayIntervalMs: 60_000 }) })
    afterAll(async () => t.close())

    const scrape = async (): Promise<number> => {
      const server = await startMetricsServer(0, '127.0.0.1')
      try {
        const text = await (await fetch(server.url)).text()
        const line = /^kbis_events_pending (\d+)$/m.exec(text)
        if (!line) throw new Error('no kbis_events_pending series')
        return Number(line[1])
      } finally {
        await new Promise((resolve) => server.close(resolve))
      }
    }

    it('counts the events written since the last round, at each scrape', async () => {
      await t.app.events.flush()
      expect(await t.app.events.pendingCount()).toBe(0)
      // The series sums the relays of this process: apps of earlier test files in this worker
      // may still count theirs.
      const others = await scrape()
      await writeRawEvents(t, 3)
      expect(await scrape()).toBe(others + 3)
      await t.app.events.flush()
      expect(await scrape()).toBe(others)
    })

    it('keeps a relay\'s last count while its store does not answer', async () => {
      const other = await createTestApp(store, undefined, { eventRelayIntervalMs: 60_000 })
      try {
        await other.app.events.flush() // its setup's events (the Admin key's)
        await t.app.events.flush()
        const before = await scrape()
        await writeRawEvents(other, 2)
        expect(await scrape()).toBe(before + 2)
        // Its store gone (the app still open): its 2 stay in the sum, the other relays still count.
        const query = other.store.db.query.bind(other.store.db)
        other.store.db.query = (() => Promise.reject(new Error('store down'))) as typeof query
        await writeRawEvents(t, 1)
        expect(await scrape()).toBe(before + 3)
        other.store.db.query = query
        await t.app.events.flush()
      } finally {
        await other.close()
      }
    })
  })
}
