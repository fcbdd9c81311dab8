import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { operatorOrigin, writeEvents } from '../../src/outbox/write.js'

const WRITERS = 8
const ROUNDS = 5

for (const store of STORES) {
  describe(`${store}: the feed under concurrent writers (exactly once, in order)`, () => {
    let t: TestApp
    // On PostgreSQL a second app on its own pool and the same schema stands for a second server process.
    let second: { app: FastifyInstance; db: Db } | null = null
    beforeAll(async () => {
      t = await createTestApp(store, undefined, { eventRelayIntervalMs: 20 })
      if (t.store.schema !== null) {
        const db = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: t.store.schema, poolSize: 5 })
        const app = await buildApp({ db, config: loadConfig({}, { eventRelayIntervalMs: 20 }) })
        await app.ready()
        second = { app, db }
      }
    })
    afterAll(async () => {
      if (second) {
        await second.app.close()
        await second.db.close()
      }
      await t.close()
    })

    async function write(n: number, method: string, url: string, body: unknown): Promise<any> {
      const app = second && n % 2 === 1 ? second.app : t.app
      const res = await app.inject({ method: method as 'POST', url, headers: { authorization: `Bearer ${t.adminKey}` }, payload: body as object })
      expect(res.statusCode).toBeLessThan(300)
      return res.body === '' ? null : JSON.parse(res.body)
    }

    it(`${WRITERS} writers commit while a reader polls: every event once, sequence strictly increasing`, async () => {
      const start = (await t.request('GET', '/api/v1/events?page[size]=1000')).body.meta.next_cursor
      let done = false
      const seen: any[] = []
      let cursor = start
      const poll = async () => {
        const res = await t.request('GET', `/api/v1/events?after=${cursor}&page[size]=50`)
        expect(res.status).toBe(200)
        seen.push(...res.body.data)
        cursor = res.body.meta.next_cursor
        return res.body.meta.has_more as boolean
      }
      const reader = (async () => {
        while (!done) {
          await poll()
          await new Promise((r) => setTimeout(r, 5))
        }
      })()
      const writers = Array.from({ length: WRITERS }, async (_, w) => {
        for (let r = 0; r < ROUNDS; r++) {
          const bulk = await write(w + r, 'POST', '/api/v1/bulk/assets', Array.from({ length: 4 }, (_, i) => ({ asset_type_key: 'note', name: `w${w}-r${r}-${i}` })))
          await write(w + r + 1, 'PATCH', `/api/v1/assets/${bulk.data[0].id}`, { name: `w${w}-r${r}-renamed` })
          await write(w + r, 'DELETE', `/api/v1/assets/${bulk.data[1].id}`, undefined)
        }
      })
      await Promise.all(writers)
      done = true
      await reader
      await second?.app.events.flush()
      while (await poll()) { /* drain */ }

      const expected = WRITERS * ROUNDS * 6
      const ids = seen.map((e) => e.id)
      expect(new Set(ids).size).toBe(ids.length)
      expect(ids.length).toBe(expected)
      const sequences = seen.map((e) => BigInt(e.sequence))
      for (let i = 1; i < sequences.length; i++) expect(sequences[i]! > sequences[i - 1]!).toBe(true)
      const stored = await t.store.db.query<{ id: string }>(`SELECT id FROM events WHERE type LIKE 'asset.%' AND data->'object'->>'name' LIKE 'w%-r%'`)
      expect(new Set(stored.rows.map((r) => r.id))).toEqual(new Set(ids))
    }, 120_000)
  })
}

describe.runIf(process.env.TEST_DATABASE_URL)('postgres: a transaction that commits late is stamped after the ones a reader already saw', () => {
  let t: TestApp
  let other: Db
  beforeAll(async () => {
    t = await createTestApp('postgres')
    other = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: t.store.schema!, poolSize: 2 })
  })
  afterAll(async () => {
    await other.close()
    await t.close()
  })

  it('never skips the late committer', async () => {
    const start = (await t.request('GET', '/api/v1/events')).body.meta.next_cursor
    const event = (name: string) => ({ type: 'asset.created' as const, subject: `assets/${name}`, object: { name } })
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    let inserted!: () => void
    const wrote = new Promise<void>((r) => (inserted = r))
    // The early writer inserts first (smaller id) and commits last.
    const late = other.transaction(async (tx) => {
      await writeEvents(tx, operatorOrigin(t.orgId), [event('late')])
      inserted()
      await held
    })
    await wrote
    await writeEvents(t.store.db, operatorOrigin(t.orgId), [event('early')])
    const first = await t.request('GET', `/api/v1/events?after=${start}`)
    expect(first.body.data.map((e: any) => e.data.object.name)).toEqual(['early'])
    release()
    await late
    const second = await t.request('GET', `/api/v1/events?after=${first.body.meta.next_cursor}`)
    expect(second.body.data.map((e: any) => e.data.object.name)).toEqual(['late'])
    expect(BigInt(second.body.data[0].sequence) > BigInt(first.body.data[0].sequence)).toBe(true)
  })
})
