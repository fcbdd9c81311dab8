import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'

/** A TCP proxy to the test PostgreSQL that the test can cut: the store "goes down" for real. */
async function proxyTo(target: URL): Promise<{ url: (schema: string) => string; cut(): void; restore(): void; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>()
  let down = false
  const server = net.createServer((client) => {
    if (down) return client.destroy()
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    for (const s of [client, upstream]) { sockets.add(s); s.on('error', () => undefined); s.on('close', () => sockets.delete(s)) }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    url: () => { const u = new URL(target.href); u.host = `127.0.0.1:${port}`; return u.href },
    cut() { down = true; for (const s of sockets) s.destroy() },
    restore() { down = false },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

/** An app on `kind`, with a way to take its store down. */
async function appWithBreakableStore(kind: string, store: TestStore) {
  if (kind === 'pglite') {
    const app = await buildApp({ db: store.db, config: loadConfig({}) })
    return { app, breakStore: () => store.db.close(), cleanup: async () => undefined }
  }
  const proxy = await proxyTo(new URL(process.env.TEST_DATABASE_URL!))
  const db: Db = await openDb({ databaseUrl: proxy.url(store.schema!), schema: store.schema!, poolSize: 2, connectTimeoutMs: 1000 })
  const app = await buildApp({ db, config: loadConfig({}) })
  return { app, breakStore: async () => proxy.cut(), cleanup: async () => { await db.close().catch(() => undefined); await proxy.close() } }
}

for (const kind of STORES) {
  describe(`${kind}: /healthz and /readyz`, () => {
    let store: TestStore
    beforeAll(async () => { store = await createTestStore(kind) })
    afterAll(async () => { if (kind === 'postgres') await store.drop() })

    it('answers 200 on both while the store answers and its migrations are current, without a key', async () => {
      const app = await buildApp({ db: store.db, config: loadConfig({}) })
      const health = await app.inject({ method: 'GET', url: '/healthz' })
      const ready = await app.inject({ method: 'GET', url: '/readyz' })
      expect([health.statusCode, health.json()]).toEqual([200, { status: 'ok' }])
      expect([ready.statusCode, ready.json()]).toEqual([200, { status: 'ok' }])
      // A query string a probe adds is ignored, one whose escapes are not UTF-8 included.
      for (const url of ['/healthz?x=1', '/healthz?%FF', '/readyz?%ZZ&%00', '/readyz?']) {
        const res = await app.inject({ method: 'GET', url })
        expect([url, res.statusCode, res.json()]).toEqual([url, 200, { status: 'ok' }])
      }
      await app.close()
    })

    it('is not ready (503 in the envelope, Retry-After) while a migration is not applied, and ready again after', async () => {
      const app = await buildApp({ db: store.db, config: loadConfig({}) })
      await store.db.query("DELETE FROM schema_migrations WHERE version = '0006_distributable_keys.sql'")
      const res = await app.inject({ method: 'GET', url: '/readyz', headers: { 'x-request-id': 'probe-1' } })
      expect(res.statusCode).toBe(503)
      expect(res.headers['retry-after']).toBe('5')
      expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: 'not ready: migrations not applied yet: 0006_distributable_keys.sql', meta: { request_id: 'probe-1' } }] })
      await store.db.query("INSERT INTO schema_migrations (version) VALUES ('0006_distributable_keys.sql')")
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
      await app.close()
    })

    it('is not ready while the store is down, and still healthy', async () => {
      const { app, breakStore, cleanup } = await appWithBreakableStore(kind, store)
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
      await breakStore()
      const res = await app.inject({ method: 'GET', url: '/readyz', headers: { 'x-request-id': 'probe-2' } })
      expect(res.statusCode).toBe(503)
      expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: 'not ready: the store does not answer', meta: { request_id: 'probe-2' } }] })
      const health = await app.inject({ method: 'GET', url: '/healthz' })
      expect([health.statusCode, health.json()]).toEqual([200, { status: 'ok' }])
      await app.close().catch(() => undefined)
      await cleanup()
    })
  })
}

for (const kind of STORES) {
  describe(`${kind}: API writes while the store's disk is full`, () => {
    let store: TestStore
    let app: Awaited<ReturnType<typeof buildApp>>
    let secret: string
    const logged: { level: number; msg: string; err?: { message: string } }[] = []
    beforeAll(async () => {
      store = await createTestStore(kind)
      await applySetup(store.db, ACME as unknown as SetupFile)
      secret = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'full', type: 'Admin', roles: ['all'] })).secret
      app = await buildApp({ db: store.db, config: loadConfig({}), logger: { level: 'error', stream: { write: (line: string) => { logged.push(JSON.parse(line)) } } } })
    })
    afterAll(async () => {
      await app.close()
      await store.drop()
    })

    it('answer 503 service_unavailable with Retry-After (a client retries), not 500, write nothing, and work again once there is space', async () => {
      const headers = { authorization: `Bearer ${secret}`, 'x-request-id': 'full-1', 'idempotency-key': 'nightly-1' }
      const post = () => app.inject({ method: 'POST', url: '/api/v1/assets', headers, payload: { asset_type_key: 'note', name: 'n-1' } })
      const bulk = () => app.inject({ method: 'POST', url: '/api/v1/bulk/assets', headers: { ...headers, 'idempotency-key': 'nightly-2' },
        payload: [{ asset_type_key: 'note', name: 'b-1' }, { asset_type_key: 'note', name: 'b-2' }] })
      const assets = async () => (await store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets')).rows[0]!.n
      const before = await assets()
      // What PostgreSQL raises when it cannot extend a file (seen on PGlite with its directory on a full tmpfs).
      await store.db.query(`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'could not extend file "base/5/16877": No space left on device' USING ERRCODE = 'disk_full'; END $$`)
      await store.db.query('CREATE TRIGGER disk_full BEFORE INSERT ON assets FOR EACH ROW EXECUTE FUNCTION disk_full()')
      for (const res of [await post(), await bulk()]) {
        expect(res.statusCode).toBe(503)
        expect(res.headers['retry-after']).toBe('30')
        expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: "the server's store is out of disk space and wrote nothing; retry later", meta: { request_id: 'full-1' } }] })
      }
      expect(await assets()).toBe(before)
      // The operator is told why, with the store's own words (which name the file).
      expect(logged.filter((line) => line.msg === 'the store is out of disk space').map((line) => [line.level, line.err?.message])).toEqual([
        [50, 'could not extend file "base/5/16877": No space left on device'],
        [50, 'could not extend file "base/5/16877": No space left on device'],
      ])
      // Reads go on meanwhile.
      expect((await app.inject({ method: 'GET', url: '/api/v1/assets', headers })).statusCode).toBe(200)
      await store.db.query('DROP TRIGGER disk_full ON assets')
      await store.db.query('DROP FUNCTION disk_full()')
      // Space freed: the same requests (same Idempotency-Keys: a 503 is not kept) now write.
      const [created, bulked] = [await post(), await bulk()]
      expect([created.statusCode, created.headers['idempotent-replayed'], bulked.statusCode]).toEqual([201, undefined, 201])
      expect(await assets()).toBe(before + 3)
    })
  })
}

describe.runIf(STORES.includes('postgres'))('postgres: API requests while the store is down', () => {
  let store: TestStore
  beforeAll(async () => { store = await createTestStore('postgres') })
  afterAll(async () => store.drop())

  it('answer 503 service_unavailable with Retry-After (a client retries), not 500, and work again once it is back', async () => {
    await applySetup(store.db, ACME as unknown as SetupFile)
    const { secret } = await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'down', type: 'Admin', roles: ['all'] })
    const proxy = await proxyTo(new URL(process.env.TEST_DATABASE_URL!))
    const db = await openDb({ databaseUrl: proxy.url(store.schema!), schema: store.schema!, poolSize: 2, connectTimeoutMs: 1000 })
    const app = await buildApp({ db, config: loadConfig({}) })
    try {
      const list = () => app.inject({ method: 'GET', url: '/api/v1/relationships', headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'down-1' } })
      expect((await list()).statusCode).toBe(200)
      proxy.cut()
      for (const res of [await list(), await app.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'down-1' }, payload: { asset_type_key: 'note', name: 'n' } })]) {
        expect(res.statusCode).toBe(503)
        expect(res.headers['retry-after']).toBe('5')
        expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: 'the database cannot be reached; retry later', meta: { request_id: 'down-1' } }] })
      }
      proxy.restore()
      expect((await list()).statusCode).toBe(200)
    } finally {
      await app.close().catch(() => undefined)
      await db.close().catch(() => undefined)
      await proxy.close()
    }
  })
})

/**
 * A database of its own on the test server, migrated, with ACME, an app over it and an Admin key:
 * what these tests drop or close under the server. `close` ends all of it.
 */
async function ownDatabase(prefix: string): Promise<{ name: string; admin: Db; app: Awaited<ReturnType<typeof buildApp>>; secret: string; close(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Date.now()}`
  const admin = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL, poolSize: 1 })
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(process.env.TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  const db = await openDb({ databaseUrl: url.toString(), poolSize: 2, connectTimeoutMs: 1000 })
  await migrate(db)
  await applySetup(db, ACME as unknown as SetupFile)
  const app = await buildApp({ db, config: loadConfig({}) })
  const { secret } = await createKeyFromCli(db, { org: 'acme', user: 'owner@acme.test', name: prefix, type: 'Admin', roles: ['all'] })
  return {
    name, admin, app, secret,
    async close() {
      await app.close().catch(() => undefined)
      await db.close().catch(() => undefined)
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
      await admin.close()
    },
  }
}

describe.runIf(STORES.includes('postgres'))('postgres: API requests when the database is gone', () => {
  it('answer 503 service_unavailable, not 500, once the database was dropped under the server', async () => {
    const { name, admin, app, secret, close } = await ownDatabase('kbis_gone')
    try {
      const list = () => app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'gone-1' } })
      expect((await list()).statusCode).toBe(200)
      await admin.query(`DROP DATABASE ${name} WITH (FORCE)`)
      // The first request may meet a connection the drop ended; the next ones connect anew and are refused.
      for (let i = 0; i < 3; i++) {
        const res = await list()
        expect(res.statusCode, res.body).toBe(503)
        expect(res.json().errors[0]).toMatchObject({ code: 'service_unavailable', detail: 'the database cannot be reached; retry later' })
      }
    } finally {
      await close()
    }
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: API requests while the database refuses new connections', () => {
  it('answer 503 service_unavailable, not 500, while it does not accept connections (55000), and work again once it does', async () => {
    const { name, admin, app, secret, close } = await ownDatabase('kbis_closed')
    try {
      const list = () => app.inject({ method: 'GET', url: '/api/v1/roles', headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'closed-1' } })
      expect((await list()).statusCode).toBe(200)
      // What an operator's maintenance does: no new connections, the open ones ended.
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name])
      for (let i = 0; i < 3; i++) {
        const res = await list()
        expect(res.statusCode, res.body).toBe(503)
        expect(res.headers['retry-after']).toBe('5')
        expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: 'the database cannot be reached; retry later', meta: { request_id: 'closed-1' } }] })
      }
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
      expect((await list()).statusCode).toBe(200)
    } finally {
      await close()
    }
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: a connection lost while a request holds it', () => {
  let store: TestStore
  beforeAll(async () => { store = await createTestStore('postgres') })
  afterAll(async () => store.drop())

  // pg-pool hears no error of a connection it has handed out: without a listener of the store's
  // own, the drop below is an 'error' event nobody hears, which ends the process (Vitest reports
  // it as an uncaught exception and fails the run).
  it('fails the transaction and the statement in flight, not the process, and the pool connects again', async () => {
    const proxy = await proxyTo(new URL(process.env.TEST_DATABASE_URL!))
    const db = await openDb({ databaseUrl: proxy.url(store.schema!), schema: store.schema!, poolSize: 2, connectTimeoutMs: 1000 })
    const uncaught: unknown[] = []
    const hear = (err: unknown) => { uncaught.push(err) }
    process.on('uncaughtException', hear)
    try {
      // Cut between two statements of a transaction: the connection is idle but checked out.
      const tx = db.transaction(async (t) => {
        await t.query('SELECT 1')
        proxy.cut()
        await new Promise((resolve) => setTimeout(resolve, 100))
        return t.query('SELECT 2')
      })
      await expect(tx).rejects.toThrow(/Connection terminated|not queryable/)
      proxy.restore()
      // Cut while a prepared statement runs.
      const slow = db.query('SELECT pg_sleep(2) AS slept', [], { prepare: true })
      await new Promise((resolve) => setTimeout(resolve, 300))
      proxy.cut()
      await expect(slow).rejects.toThrow(/Connection terminated/)
      proxy.restore()
      // The broken connections were dropped: the next statements get new ones.
      expect((await db.query<{ n: number }>('SELECT 3 AS n', [], { prepare: true })).rows).toEqual([{ n: 3 }])
      expect(await db.transaction(async (t) => (await t.query<{ n: number }>('SELECT 4 AS n')).rows)).toEqual([{ n: 4 }])
      expect(uncaught).toEqual([])
    } finally {
      process.off('uncaughtException', hear)
      await db.close().catch(() => undefined)
      await proxy.close()
    }
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: a database that takes no writes', () => {
  it('answers 503 service_unavailable with Retry-After, not 500, while the database is read-only', async () => {
    const { name, admin, app, secret, close } = await ownDatabase('kbis_readonly')
    try {
      const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
        app.inject({ method, url, headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'ro-1' }, ...(payload ? { payload } : {}) })
      expect((await call('GET', '/api/v1/assets')).statusCode).toBe(200)
      // What a failover that left DATABASE_URL on a standby, or a provider's read-only mode, does.
      await admin.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name])
      // The first requests may meet connections the termination is ending (503, the database cannot be reached).
      for (let i = 0; i < 20 && !(await call('GET', '/api/v1/assets')).body.includes('read-only'); i++) await new Promise((resolve) => setTimeout(resolve, 100))
      for (const [method, url, payload] of [['GET', '/api/v1/assets', undefined], ['POST', '/api/v1/assets', { asset_type_key: 'note', name: 'ro' }]] as const) {
        const res = await call(method, url, payload)
        expect(res.statusCode, `${method} ${res.body}`).toBe(503)
        expect(res.body, res.body).toContain('read-only')
        expect(res.headers['retry-after']).toBe('30')
        expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: "the server's database is read-only and wrote nothing; retry later", meta: { request_id: 'ro-1' } }] })
      }
      // CONTRACT §17: ready is "the store answers and migrations are current", which a read-only store does.
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
      await admin.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`)
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name])
      for (let i = 0; i < 20 && (await call('GET', '/api/v1/assets')).statusCode !== 200; i++) await new Promise((resolve) => setTimeout(resolve, 100))
      expect((await call('POST', '/api/v1/assets', { asset_type_key: 'note', name: 'rw again' })).statusCode).toBe(201)
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
    } finally {
      await close()
    }
  })
})
