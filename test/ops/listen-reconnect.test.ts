import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { INVALIDATE_CHANNEL } from '../../src/core/channels.js'
import { createTestStore, STORES, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'

/**
 * PostgreSQL only (PGlite has no LISTEN across processes): when the LISTEN connection drops, the
 * process reconnects with back-off, logs it, empties its caches (changes made meanwhile were not
 * notified), and receives notifications again.
 */
describe.runIf(STORES.includes('postgres'))('postgres: the LISTEN connection reconnects', () => {
  let store: TestStore
  let app: FastifyInstance
  let other: Db
  let otherApp: FastifyInstance
  const logs: { level: number; msg: string }[] = []
  let adminKey = ''

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, ACME as unknown as SetupFile)
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line))
        done()
      },
    })
    app = await buildApp({ db: store.db, config: loadConfig({}), logger: { level: 'info', stream } })
    await app.ready()
    // "Another process": its own pool on the same schema, its own app.
    other = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: store.schema!, poolSize: 2 })
    otherApp = await buildApp({ db: other, config: loadConfig({}) })
    await otherApp.ready()
    adminKey = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'admin', type: 'Admin', roles: ['all'] })).secret
  })
  afterAll(async () => {
    await otherApp.close()
    await other.close()
    await app.close()
    await store.drop()
  })

  const get = (target: FastifyInstance, url: string, key: string) => target.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } })
  const pidOf = () => (store.db as Db & { listenerProcessId: number | null }).listenerProcessId
  async function until(what: string, check: () => Promise<boolean> | boolean, ms = 8_000): Promise<number> {
    const start = Date.now()
    while (Date.now() - start < ms) {
      if (await check()) return Date.now() - start
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error(`${what}: not within ${ms} ms`)
  }

  /**
   * Until the notifications sent so far have reached this process: PostgreSQL delivers them to a
   * listener in commit order, so once a marker sent now arrives, every earlier one (the key
   * creation's, which empties acme's cached metamodel) has been handled.
   */
  async function notificationsHandled(): Promise<void> {
    const marker = `marker-${Math.random()}`
    let seen = false
    await store.db.listen(INVALIDATE_CHANNEL, (payload) => { if (payload === marker) seen = true })
    await store.db.notify(INVALIDATE_CHANNEL, marker)
    await until('marker notification', () => seen)
  }

  it('reconnects after pg_terminate_backend, logs it, reloads the caches and sees later changes', async () => {
    const victim = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'victim', type: 'Viewer', roles: ['all'] }))
    // The key's notification, arriving after the first read below, would empty the cache that the
    // read fills, and the un-notified change would show for that reason (seen on a loaded machine).
    await notificationsHandled()
    expect((await get(app, '/api/v1/metamodel/asset-types/note', victim.secret)).json().data.name).toBe('Note')
    const first = pidOf()
    expect(first).toBeTypeOf('number')

    // A change nobody notifies (as one made while the connection is down would be missed)…
    await other.query(`UPDATE asset_types SET name = 'Renamed note' WHERE key = 'note'`)
    expect((await get(app, '/api/v1/metamodel/asset-types/note', victim.secret)).json().data.name).toBe('Note')
    // …then the listening connection is killed from another connection.
    await other.query('SELECT pg_terminate_backend($1)', [first])
    await until('reconnected', () => pidOf() !== null && pidOf() !== first)
    expect(logs.some((l) => l.level === 40 && /LISTEN connection lost; reconnecting in \d+ ms/.test(l.msg))).toBe(true)
    expect(logs.some((l) => l.level === 30 && l.msg === 'LISTEN connection restored; metamodel and key caches reloaded')).toBe(true)
    // The caches were reloaded: the change made meanwhile shows.
    expect((await get(app, '/api/v1/metamodel/asset-types/note', victim.secret)).json().data.name).toBe('Renamed note')

    // And notifications arrive again: another process revokes the key, this one refuses it within seconds.
    expect((await get(app, '/api/v1/assets', victim.secret)).statusCode).toBe(200)
    const del = await otherApp.inject({ method: 'DELETE', url: `/api/v1/api-keys/${victim.id}`, headers: { authorization: `Bearer ${adminKey}` } })
    expect(del.statusCode).toBe(204)
    const took = await until('revocation seen', async () => (await get(app, '/api/v1/assets', victim.secret)).statusCode === 401, 3_000)
    expect(took).toBeLessThan(3_000)
  })

  it('reconnects again after repeated drops and receives notifications', async () => {
    // Two drops in a row: the second kill hits the freshly reconnected listener.
    for (let i = 0; i < 2; i++) {
      const pid = pidOf()
      await other.query('SELECT pg_terminate_backend($1)', [pid])
      await until(`reconnect ${i}`, () => pidOf() !== null && pidOf() !== pid)
    }
    await other.query(`UPDATE asset_types SET name = 'Note again' WHERE key = 'note'`)
    await other.query('SELECT pg_notify($1, $2)', ['kbis_invalidate', ''])
    await until('notified', async () => (await get(app, '/api/v1/metamodel/asset-types/note', adminKey)).json().data.name === 'Note again', 3_000)
  })
})
