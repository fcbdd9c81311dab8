import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'
import { startReplicaPair, type ReplicaPair } from '../helpers/replica.js'
import { openReadRouting } from '../../src/store/replica.js'
import { tcpProxy } from '../helpers/tcp-proxy.js'

// Long enough for the reads below on a busy 2-core machine, short enough to wait out once.
const WINDOW_MS = 3000

/**
 * Against a real streaming replica. Replay is paused on the standby to make the replica visibly
 * behind: what a request sees tells which server answered it.
 */
describe.runIf(STORES.includes('postgres'))('postgres: reads from a streaming replica (DATABASE_READ_URL)', { timeout: 120_000 }, () => {
  let pair: ReplicaPair
  let primary: Db
  const apps: FastifyInstance[] = []
  let writer: string
  let reader: string

  beforeAll(async () => {
    pair = await startReplicaPair()
    primary = await openDb({ databaseUrl: pair.primaryUrl, poolSize: 4 })
    await migrate(primary)
    await applySetup(primary, ACME as unknown as SetupFile)
    const key = (name: string) => createKeyFromCli(primary, { org: 'acme', user: 'owner@acme.test', name, type: 'Admin', roles: ['all'] }).then((k) => k.secret)
    writer = await key('writer')
    reader = await key('reader')
    await pair.caughtUp()
  })
  afterAll(async () => {
    for (const app of apps) await app.close()
    await primary?.close()
    await pair?.close()
  })

  const appWith = async (redisUrl: string | undefined) => {
    const app = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS, redisUrl }) })
    apps.push(app)
    return app
  }
  const call = (app: FastifyInstance, key: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
    app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(payload ? { payload } : {}) })
  const listedNames = async (app: FastifyInstance, key: string) =>
    ((await call(app, key, 'GET', '/api/v1/assets')).json() as { data: { name: string }[] }).data.map((a) => a.name)
  // The export reads where the list reads (CONTRACT §17).
  const exportedNames = async (app: FastifyInstance, key: string) =>
    (await call(app, key, 'GET', '/api/v1/export/assets?format=ndjson')).body.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { name: string }).name)
  const searchTotal = async (app: FastifyInstance, key: string) =>
    ((await call(app, key, 'POST', '/api/v1/search/assets', { filter: { field: 'asset_type_key', operator: 'equals', value: 'server' } })).json() as { meta: { page: { total_items: number } } }).meta.page.total_items

  // Read-after-write marks shared through the primary (no Redis) and through Redis when the suite has one.
  const MARKS: { name: string; redisUrl: string | undefined }[] = [
    { name: 'the primary', redisUrl: undefined },
    ...(process.env.TEST_REDIS_URL ? [{ name: 'Redis', redisUrl: process.env.TEST_REDIS_URL }] : []),
  ]
  for (const [round, marks] of MARKS.entries()) {
    it(`lists and searches on the replica; a key that has just written reads the primary, in any process, for the window (marks in ${marks.name})`, async () => {
      // Two processes' worth of apps on the same primary and replica: read-after-write must hold across them.
      const [one, two] = [await appWith(marks.redisUrl), await appWith(marks.redisUrl)]
      const name = `fresh-${round}`
      const before = round
      await pair.pauseReplay()
      const created = await call(one, writer, 'POST', '/api/v1/assets', { asset_type_key: 'server', name, properties: { hostname: `${name}.acme.test` } })
      expect(created.statusCode).toBe(201)
      // The window starts when the write is answered.
      const writtenAt = Date.now()
      const id = (created.json() as { data: { id: string } }).data.id

      // The writer, here and in the other process: the primary.
      expect(await listedNames(one, writer)).toContain(name)
      expect(await listedNames(two, writer)).toContain(name)
      // Another key: the replica, which has not replayed the write.
      expect(await listedNames(one, reader)).toHaveLength(before)
      expect(await listedNames(two, reader)).toHaveLength(before)
      expect(await searchTotal(two, reader)).toBe(before)
      expect(await exportedNames(two, reader)).toHaveLength(before)
      expect(await exportedNames(two, writer)).toContain(name)
      // A read by id stays on the primary.
      expect((await call(two, reader, 'GET', `/api/v1/assets/${id}`)).statusCode).toBe(200)
      expect(Date.now() - writtenAt).toBeLessThan(WINDOW_MS)

      // Once the window has passed, the writer reads the replica again.
      await new Promise((resolve) => setTimeout(resolve, writtenAt + WINDOW_MS + 100 - Date.now()))
      expect(await listedNames(one, writer)).not.toContain(name)
      expect(await listedNames(two, writer)).not.toContain(name)

      await pair.resumeReplay()
      await pair.caughtUp()
      expect(await listedNames(two, reader)).toContain(name)
      expect(await searchTotal(one, reader)).toBe(before + 1)
    })
  }

  it('remembers the counts of replica reads apart, once the replica has had the lag window to catch up', async () => {
    const routing = await openReadRouting(primary, { readUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS, poolSize: 2, onReplicaDown: () => undefined })
    const app = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS }), readRouting: routing })
    apps.push(app)
    let counted = 0
    routing.reader.replica.onQuery = (sql) => void (/^SELECT count\(\*\)/.test(sql) && counted++)
    const notes = { field: 'name', operator: 'starts_with', value: 'cnt-' }
    const total = async (key: string) => {
      // A page of 1 over 2 or more matches: a short first page would tell the total without any count.
      const res = await call(app, key, 'POST', '/api/v1/search/assets', { filter: { and: [{ field: 'asset_type_key', operator: 'equals', value: 'note' }, notes] }, page: { number: 1, size: 1 } })
      expect(res.statusCode).toBe(200)
      return (res.json() as { meta: { page: { total_items: number } } }).meta.page.total_items
    }
    const ids: string[] = []
    const write = async (name: string) => {
      const res = await call(app, writer, 'POST', '/api/v1/assets', { asset_type_key: 'note', name })
      expect(res.statusCode).toBe(201)
      ids.push((res.json() as { data: { id: string } }).data.id)
    }
    try {
      await write('cnt-1')
      await write('cnt-2')
      await pair.caughtUp()
      await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 100))

      // Settled: the replica's count is taken once, then remembered.
      expect([await total(reader), await total(reader)]).toEqual([2, 2])
      expect(counted).toBe(1)

      // A write starts a generation: the writer reads the primary, with the primary's own count;
      // the reader's replica counts are answered but not remembered within the window.
      await pair.pauseReplay()
      await write('cnt-3')
      expect(await total(writer)).toBe(3)
      expect([await total(reader), await total(reader)]).toEqual([2, 2])
      expect(counted).toBe(3)
      await pair.resumeReplay()
      await pair.caughtUp()
      await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 100))
      expect([await total(reader), await total(reader)]).toEqual([3, 3])
      expect(counted).toBe(4)
    } finally {
      // The other tests count the live assets: archive these again.
      await pair.resumeReplay()
      for (const id of ids) expect((await call(app, writer, 'DELETE', `/api/v1/assets/${id}`)).statusCode).toBe(204)
      await pair.caughtUp()
    }
  })

  /** An app's warnings, as the log lines' messages. */
  const logged = () => {
    const lines: Record<string, unknown>[] = []
    const stream = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
    return { lines, logger: { level: 'warn', stream } }
  }
  /** `work`, or a failure after `ms`: what used to hang must not fail the suite by its time-out. */
  const within = <T>(ms: number, work: Promise<T>): Promise<T> =>
    Promise.race([work, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms))])

  it('falls back to the primary when the replica stops answering (no reply at all), after the statement timeout and a second', async () => {
    const proxy = await tcpProxy(pair.replicaUrl, 5432)
    const log = logged()
    const app = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: proxy.url, readAfterWriteMs: WINDOW_MS, statementTimeoutMs: 1000 }), logger: log.logger })
    apps.push(app)
    try {
      // The pool holds a connection to the replica; then the replica goes silent.
      await pair.caughtUp()
      const names = await listedNames(app, reader)
      expect(log.lines).toEqual([])
      proxy.freeze()
      const res = await within(15_000, app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${reader}`, 'x-request-id': 'replica-silent' } }))
      expect(res.statusCode).toBe(200)
      expect((res.json() as { data: { name: string }[] }).data.map((a) => a.name)).toEqual(names)
      expect(log.lines.map((l) => [l.msg, l.request_id, (l.err as { message?: string } | undefined)?.message])).toEqual([
        ['read replica unavailable; reading from the primary for a while', 'replica-silent', 'Query read timeout'],
      ])
      // Within the back-off, reads go to the primary without trying.
      expect(await within(5_000, listedNames(app, reader))).toEqual(names)
    } finally {
      proxy.thaw()
      await proxy.close()
    }
  })

  it('waits for a free replica connection when all are busy: a busy replica is not an unavailable one', async () => {
    const down: unknown[] = []
    const routing = await openReadRouting(primary, { readUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS, poolSize: 1, onReplicaDown: (err) => void down.push(err) })
    try {
      // The one connection busy for longer than the replica's 1 s connect timeout.
      const busy = routing.reader.replica.query('SELECT pg_sleep(1.5)')
      const read = await routing.reader.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby')
      await busy
      expect(read.rows).toEqual([{ standby: true }])
      expect(down).toEqual([])
      expect(routing.reader.fallbacks).toBe(0)
    } finally {
      await routing.close()
    }
  })

  describe.runIf(process.env.TEST_REDIS_URL)('read-after-write while Redis is unavailable', () => {
    const MARKS_DOWN = 'read-after-write Redis unavailable; recent writers read from the primary, marks told through it, for a while'

    it('a write is answered at once while Redis stops answering, and the writer reads the primary', async () => {
      const proxy = await tcpProxy(process.env.TEST_REDIS_URL!, 6379)
      const log = logged()
      const app = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS, redisUrl: proxy.url }), logger: log.logger })
      apps.push(app)
      const ids: string[] = []
      try {
        await pair.caughtUp()
        expect(await listedNames(app, reader)).toHaveLength(MARKS.length)
        await pair.pauseReplay()
        proxy.freeze()
        for (const name of ['silent-redis-1', 'silent-redis-2']) {
          const created = await within(10_000, call(app, writer, 'POST', '/api/v1/assets', { asset_type_key: 'note', name }))
          expect(created.statusCode).toBe(201)
          ids.push((created.json() as { data: { id: string } }).data.id)
        }
        expect(await within(10_000, listedNames(app, writer))).toEqual(expect.arrayContaining(['silent-redis-1', 'silent-redis-2']))
        // While the marks cannot be read, every key reads the primary.
        expect(await within(10_000, listedNames(app, reader))).toEqual(expect.arrayContaining(['silent-redis-1', 'silent-redis-2']))
        // One outage, said once (not a line per write).
        expect(log.lines.filter((l) => l.msg === MARKS_DOWN)).toHaveLength(1)
        expect(log.lines.map((l) => l.msg)).not.toContain('read-after-write mark failed')
      } finally {
        proxy.thaw()
        await proxy.close()
        await pair.resumeReplay()
        for (const id of ids) expect((await call(app, writer, 'DELETE', `/api/v1/assets/${id}`)).statusCode).toBe(204)
        await pair.caughtUp()
      }
    })

    it("a write Redis could not mark is told to the other processes: the writer's reads there go to the primary", async () => {
      // This process reaches Redis through a proxy that is cut; the other one reaches it directly,
      // and finds no mark there.
      const proxy = await tcpProxy(process.env.TEST_REDIS_URL!, 6379)
      const cut = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: 10_000, redisUrl: proxy.url }) })
      apps.push(cut)
      // A store of its own, as another server process has (a notification from this one reaches it through PostgreSQL).
      const otherDb = await openDb({ databaseUrl: pair.primaryUrl, poolSize: 2 })
      const other = await buildApp({ db: otherDb, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: 10_000, redisUrl: process.env.TEST_REDIS_URL }) })
      let id: string | undefined
      try {
        await pair.caughtUp()
        await listedNames(cut, reader)
        await listedNames(other, reader)
        await pair.pauseReplay()
        await proxy.stop()
        const created = await call(cut, writer, 'POST', '/api/v1/assets', { asset_type_key: 'note', name: 'unmarked' })
        expect(created.statusCode).toBe(201)
        id = (created.json() as { data: { id: string } }).data.id
        await expect.poll(() => listedNames(other, writer), { timeout: 3_000 }).toContain('unmarked')
        expect(await listedNames(other, reader)).not.toContain('unmarked')
      } finally {
        await proxy.close()
        await pair.resumeReplay()
        if (id) expect((await call(other, writer, 'DELETE', `/api/v1/assets/${id}`)).statusCode).toBe(204)
        await pair.caughtUp()
        await other.close()
        await otherDb.close()
      }
    })
  })

  it('falls back to the primary when the replica is down, saying so on the line of the request that found it', async () => {
    await pair.stopReplica()
    const started = Date.now()
    const lines: Record<string, unknown>[] = []
    const stream = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
    const app = await buildApp({ db: primary, config: loadConfig({}, { databaseReadUrl: pair.replicaUrl, readAfterWriteMs: WINDOW_MS }), logger: { level: 'warn', stream } })
    apps.push(app)
    const first = await app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${reader}`, 'x-request-id': 'replica-down-1' } })
    expect(first.statusCode).toBe(200)
    expect(lines.filter((l) => l.msg === 'read replica unavailable; reading from the primary for a while').map((l) => l.request_id)).toEqual(['replica-down-1'])
    expect(await listedNames(app, reader)).toHaveLength(MARKS.length)
    expect(await searchTotal(app, reader)).toBe(MARKS.length)
    expect((await exportedNames(app, reader)).sort()).toEqual((await listedNames(app, reader)).sort())
    expect((await call(app, reader, 'POST', '/api/v1/analytics/assets', {})).json()).toEqual({ data: [{ group: {}, measures: { count: MARKS.length } }], meta: { total_groups: 1 } })
    expect(Date.now() - started).toBeLessThan(10_000)
    // Still down once the back-off is over: the replica is tried again, and the same outage is not reported again.
    await new Promise((resolve) => setTimeout(resolve, 5_200))
    const later = await app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${reader}`, 'x-request-id': 'replica-down-2' } })
    expect(later.statusCode).toBe(200)
    expect(lines.filter((l) => l.msg === 'read replica unavailable; reading from the primary for a while').map((l) => l.request_id)).toEqual(['replica-down-1'])
  })
})

/**
 * A replica that refuses the connection at login (its database is not there, or does not accept
 * connections) cannot answer either: reads fall back to the primary as for a replica that is down.
 */
describe.runIf(STORES.includes('postgres'))('postgres: a replica that refuses the login', () => {
  let store: TestStore
  const closed = `kbis_closed_replica_${process.pid}_${Date.now()}`
  let admin: Db
  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, ACME as unknown as SetupFile)
    admin = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL, poolSize: 1 })
    await admin.query(`CREATE DATABASE ${closed}`)
    await admin.query(`ALTER DATABASE ${closed} ALLOW_CONNECTIONS false`)
  })
  afterAll(async () => {
    await admin?.query(`DROP DATABASE IF EXISTS ${closed}`)
    await admin?.close()
    await store?.drop()
  })

  for (const [what, database] of [['is not there (3D000)', `kbis_no_replica_${process.pid}`], ['does not accept connections (55000)', closed]] as const) {
    it(`reads from the primary when the replica's database ${what}`, async () => {
      const readUrl = new URL(process.env.TEST_DATABASE_URL!)
      readUrl.pathname = `/${database}`
      const lines: Record<string, unknown>[] = []
      const stream = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
      const app = await buildApp({ db: store.db, config: loadConfig({}, { databaseReadUrl: readUrl.toString(), readAfterWriteMs: 100 }), logger: { level: 'warn', stream } })
      try {
        const { secret } = await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: `refused ${database}`, type: 'Admin', roles: ['all'] })
        const headers = { authorization: `Bearer ${secret}`, 'x-request-id': 'refused-1' }
        const created = await app.inject({ method: 'POST', url: '/api/v1/assets', headers, payload: { asset_type_key: 'note', name: `note ${database}` } })
        expect(created.statusCode).toBe(201)
        // Past the read-after-write window, so that the list is a replica read.
        await new Promise((resolve) => setTimeout(resolve, 200))
        const list = await app.inject({ method: 'GET', url: `/api/v1/assets?filter[name]=note ${database}`, headers })
        expect(list.statusCode, list.body).toBe(200)
        expect(list.json().data.map((a: { id: string }) => a.id)).toEqual([created.json().data.id])
        const search = await app.inject({ method: 'POST', url: '/api/v1/search/assets', headers, payload: { filter: { field: 'name', operator: 'equals', value: `note ${database}` } } })
        expect(search.statusCode, search.body).toBe(200)
        expect(search.json().meta.page.total_items).toBe(1)
        expect(lines.filter((l) => l.msg === 'read replica unavailable; reading from the primary for a while').map((l) => l.request_id)).toEqual(['refused-1'])
      } finally {
        await app.close()
      }
    })
  }
})
