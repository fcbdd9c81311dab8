import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES, type TestStore } from '../helpers/stores.js'
import { createAcmeStore } from '../helpers/app.js'
import { eventually } from '../helpers/webhook-receiver.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'

// PostgreSQL only: PGlite has no statement timeout.
describe.runIf(STORES.includes('postgres'))('postgres: a stamping batch that runs past the statement timeout', () => {
  let store: TestStore
  let db: Db
  let app: FastifyInstance
  let key: string
  beforeAll(async () => {
    const acme = await createAcmeStore('postgres', 'batch')
    store = acme.store
    key = acme.key
    db = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: store.schema!, poolSize: 5, statementTimeoutMs: 300 })
    app = await buildApp({ db, config: loadConfig({}, { statementTimeoutMs: 300 }) })
    // What a batch's hooks cost grows with its events (one delivery per matching webhook, each
    // with the event's JSON): here half a millisecond of the database per event.
    app.events.onStamped(async (tx, events) => {
      await tx.query('SELECT pg_sleep($1)', [events.length * 0.0005])
    })
    await app.ready()
  })
  afterAll(async () => {
    await app?.close()
    await db?.close()
    await store?.drop()
  })

  it('is taken again in halves until it fits, so that events go on being stamped', { timeout: 60_000 }, async () => {
    const items = Array.from({ length: 1000 }, (_, i) => ({ asset_type_key: 'note', name: `batch-${i}` }))
    const res = await app.inject({ method: 'POST', url: '/api/v1/bulk/assets', payload: items, headers: { authorization: `Bearer ${key}` } })
    expect(res.statusCode).toBe(201)
    // 1,000 events in one batch take 500 ms of the database, past the 300 ms timeout: the same
    // batch used to run past it round after round, and nothing was stamped again.
    await eventually(async () => (await app.events.pendingCount()) === 0, 40_000, 200)
    const stamped = await store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE type = 'asset.created' AND sequence IS NOT NULL")
    expect(stamped.rows[0]!.n).toBe(1000)
  })
})
