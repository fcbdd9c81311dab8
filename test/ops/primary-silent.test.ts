import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import copyStreams from 'pg-copy-streams'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { PRIMARY_ANSWER_MARGIN_MS, openStore } from '../../src/open-store.js'
import { openDb, type Db } from '../../src/store/db.js'
import { STORES, type TestStore } from '../helpers/stores.js'
import { createAcmeStore } from '../helpers/app.js'
import { tcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js'

const STATEMENT_TIMEOUT_MS = 1_000
const ANSWER_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + PRIMARY_ANSWER_MARGIN_MS

const within = <T>(ms: number, work: Promise<T>): Promise<T> =>
  Promise.race([work, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms))])

interface Served { store: TestStore; key: string; proxy: TcpProxy; db: Db; app: FastifyInstance }

/** The acme store of `name`, opened as `kbis serve` opens it (openStore) with `env`, through a proxy to PostgreSQL; `params` join its URL. */
async function serveThroughProxy(name: string, env: Record<string, string>, params: Record<string, string> = {}): Promise<Served> {
  const { store, key } = await createAcmeStore('postgres', name)
  const proxy = await tcpProxy(process.env.TEST_DATABASE_URL!, 5432)
  const url = new URL(proxy.url)
  url.searchParams.set('options', `-c search_path=${store.schema}`)
  for (const [param, value] of Object.entries(params)) url.searchParams.set(param, value)
  const config = loadConfig({ DATABASE_URL: url.href, ...env })
  const db = await openStore(config)
  const app = await buildApp({ db, config, logger: false })
  await app.ready()
  return { store, key, proxy, db, app }
}

/**
 * A PostgreSQL that stops answering (a frozen machine, packets dropped without a reset) cannot
 * fire its own statement_timeout. The server, opened as `kbis serve` opens it (openStore) through
 * a proxy that freezes, answers 503 once a statement has had no answer for the statement timeout
 * and the margin, rather than hold the request for as long as its client waits.
 */
describe.runIf(STORES.includes('postgres'))('postgres: a primary that stops answering', () => {
  let store: TestStore
  let proxy: TcpProxy
  let db: Db
  let app: FastifyInstance
  let key: string

  beforeAll(async () => {
    ({ store, key, proxy, db, app } = await serveThroughProxy('silent', { KBIS_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS) }))
  })
  afterAll(async () => {
    proxy?.thaw()
    await app?.close()
    await proxy?.close()
    await store?.drop()
  })

  const call = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => {
    const started = performance.now()
    // What used to hang must fail here, not by the suite's time-out.
    const res = await within(15_000, app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(payload === undefined ? {} : { payload }) }))
    return { status: res.statusCode, body: res.json() as { errors?: { code: string }[] }, headers: res.headers, ms: performance.now() - started }
  }

  it('answers 503 service_unavailable after the statement timeout and the margin, reads and writes alike, and serves again once it answers', async () => {
    const note = (name: string) => ({ asset_type_key: 'note', name, properties: { body: name } })
    expect((await call('POST', '/api/v1/assets', note('before'))).status).toBe(201)
    expect((await call('GET', '/api/v1/assets')).status).toBe(200)
    proxy.freeze()
    try {
      const read = await call('GET', '/api/v1/assets?filter[name]=before')
      expect([read.status, read.body.errors?.[0]?.code, read.headers['retry-after']]).toEqual([503, 'service_unavailable', '5'])
      expect(read.ms).toBeGreaterThanOrEqual(ANSWER_TIMEOUT_MS - 50)
      expect(read.ms).toBeLessThan(ANSWER_TIMEOUT_MS + 2_000)
      // A write: its transaction's connection is dropped, not rolled back first (a ROLLBACK would
      // wait out the answer timeout a second time).
      const write = await call('POST', '/api/v1/assets', note('while-frozen'))
      expect([write.status, write.body.errors?.[0]?.code]).toEqual([503, 'service_unavailable'])
      expect(write.ms).toBeLessThan(2 * ANSWER_TIMEOUT_MS)
    } finally {
      proxy.thaw()
    }
    expect((await call('POST', '/api/v1/assets', note('after'))).status).toBe(201)
    const names = (await call('GET', '/api/v1/assets?sort=name')).body as unknown as { data: { name: string }[] }
    expect(names.data.map((a) => a.name)).toEqual(['after', 'before'])
  }, 60_000)

  it('drops a transaction\'s connection that stopped answering instead of waiting for a ROLLBACK behind it', async () => {
    proxy.freeze()
    try {
      const started = performance.now()
      const failed = await within(15_000, db.transaction((tx) => tx.query('SELECT 1')).then(() => null, (err: Error) => err.message))
      const ms = performance.now() - started
      expect(failed).toBe('Query read timeout')
      // One answer timeout (BEGIN's), not two.
      expect(ms).toBeGreaterThanOrEqual(ANSWER_TIMEOUT_MS - 50)
      expect(ms).toBeLessThan(ANSWER_TIMEOUT_MS + 1_500)
    } finally {
      proxy.thaw()
    }
    expect((await db.transaction((tx) => tx.query<{ one: number }>('SELECT 1 AS one'))).rows).toEqual([{ one: 1 }])
  }, 60_000)

  it('stops the answer timer of a COPY that has ended (pg stops it in a callback a COPY stream never calls)', async () => {
    const copying = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: store.schema!, poolSize: 1, answerTimeoutMs: 300 })
    const failedLate = vi.spyOn(Object.getPrototypeOf(copyStreams.to('COPY x TO STDOUT')) as { handleError(err: Error): void }, 'handleError')
    try {
      const lines = await copying.copyLines!('SELECT name FROM assets WHERE name = $1', ['before'])
      expect(Buffer.concat(lines).toString()).toBe('before\n')
      await new Promise((resolve) => setTimeout(resolve, 600))
      expect(failedLate).not.toHaveBeenCalled()
    } finally {
      failedLate.mockRestore()
      await copying.close()
    }
  })
})

/**
 * A PostgreSQL that takes new connections and never answers them (a frozen server, a middlebox
 * black-holing a flow): every connection the server opens gives up after KBIS_CONNECT_TIMEOUT_MS.
 * Without it a pooled connection's open held its request for as long as the client waited, and the
 * LISTEN connection's reconnection hung for good (revocations no longer reached this process; found
 * by an outside audit).
 */
describe.runIf(STORES.includes('postgres'))('postgres: a primary that takes connections and never answers them', () => {
  const CONNECT_TIMEOUT_MS = 500
  const name = `kbis_silent_connect_${process.pid}`
  let store: TestStore
  let proxy: TcpProxy
  let db: Db
  let app: FastifyInstance
  let key: string
  let admin: Db

  beforeAll(async () => {
    ({ store, key, proxy, db, app } = await serveThroughProxy('silentconnect', { KBIS_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS) }, { application_name: name }))
    admin = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, poolSize: 1 })
  })
  afterAll(async () => {
    // First: a connection still held would keep the pool from ending.
    await proxy?.close()
    await app?.close()
    await admin?.close()
    await store?.drop()
  })

  const listener = () => (db as Db & { listenerProcessId: number | null }).listenerProcessId
  const get = async (url: string) => {
    const started = performance.now()
    const res = await within(15_000, app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } }))
    return { status: res.statusCode, code: (res.json() as { errors?: { code: string }[] }).errors?.[0]?.code, ms: performance.now() - started }
  }
  async function until(what: string, check: () => boolean, ms: number): Promise<void> {
    const start = Date.now()
    while (!check()) {
      if (Date.now() - start > ms) throw new Error(`${what}: not within ${ms} ms`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  it('answers 503 instead of waiting for a connection, and the LISTEN connection reconnects once connections are answered again', async () => {
    expect((await get('/api/v1/assets')).status).toBe(200)
    const first = listener()
    expect(first).toBeTypeOf('number')
    proxy.holdNew()
    // Every connection of this server ends (the pool's and the listener's): each new one is held.
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [name])
    await until('listener lost', () => listener() === null, 5_000)
    // The listener's reconnection (after 250 ms) is held now, and the pool has dropped its broken connections.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const refused = await get('/api/v1/assets')
    expect([refused.status, refused.code]).toEqual([503, 'service_unavailable'])
    expect(refused.ms).toBeGreaterThanOrEqual(CONNECT_TIMEOUT_MS - 50)
    expect(refused.ms).toBeLessThan(CONNECT_TIMEOUT_MS * 6)
    proxy.forwardNew()
    // The listener's back-off is at most 5 s; its held attempt gave up after the connect timeout.
    await until('listener back', () => listener() !== null && listener() !== first, 10_000)
    expect((await get('/api/v1/assets')).status).toBe(200)
  }, 60_000)
})
