import { connect } from 'node:net'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { openDb, type Db } from '../../src/store/db.js'
import { OrgConcurrency } from '../../src/core/org-concurrency.js'

for (const store of STORES) {
  describe(`${store}: statement timeout and per-organization concurrency`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, ACME, { orgConcurrency: 2 })
    })
    afterAll(async () => t.close())

    it('documents 503 (service_unavailable, query_timeout) on the authenticated operations', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      for (const [path, method] of [['/api/v1/assets', 'get'], ['/api/v1/search/assets', 'post'], ['/api/v1/analytics/assets', 'post']] as const) {
        const res = doc.paths[path][method].responses['503']
        expect(res?.description, `${method} ${path}`).toMatch(/query_timeout/)
      }
    })

    it('reads KBIS_STATEMENT_TIMEOUT_MS (default 10000) and KBIS_ORG_CONCURRENCY', () => {
      expect(loadConfig({}).statementTimeoutMs).toBe(10_000)
      expect(loadConfig({ KBIS_STATEMENT_TIMEOUT_MS: '250', KBIS_ORG_CONCURRENCY: '3' })).toMatchObject({ statementTimeoutMs: 250, orgConcurrency: 3 })
      expect(() => loadConfig({ KBIS_STATEMENT_TIMEOUT_MS: '-1' })).toThrow(/KBIS_STATEMENT_TIMEOUT_MS/)
      // The start's wait for a first PostgreSQL connection (test/cli/cli.test.ts: a server that never answers).
      expect(loadConfig({}).connectTimeoutMs).toBe(10_000)
      expect(loadConfig({ KBIS_CONNECT_TIMEOUT_MS: '2500' }).connectTimeoutMs).toBe(2500)
      expect(() => loadConfig({ KBIS_CONNECT_TIMEOUT_MS: '0' })).toThrow(/KBIS_CONNECT_TIMEOUT_MS/)
    })

    it('serves many concurrent requests of one organization through its slots, all answered', async () => {
      const answers = await Promise.all(Array.from({ length: 12 }, () => t.request('GET', '/api/v1/assets')))
      expect(answers.map((r) => r.status)).toEqual(Array(12).fill(200))
    })

    it('holds no slot while a body arrives: requests whose bodies never finish do not stop the organization', async () => {
      const base = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }))
      // More stalled uploads than the organization has slots (2), each with its headers read and
      // a body that stops after a few bytes.
      const stalled = await Promise.all(Array.from({ length: 4 }, async () => {
        const socket = connect(Number(base.port), '127.0.0.1')
        await once(socket, 'connect')
        socket.write(['POST /api/v1/search/assets HTTP/1.1', `Host: ${base.host}`, `Authorization: Bearer ${t.adminKey}`,
          'Content-Type: application/json', 'Content-Length: 100', '', '{"page":'].join('\r\n'))
        return socket
      }))
      try {
        await new Promise((resolve) => setTimeout(resolve, 300))
        const started = performance.now()
        const res = await fetch(`${base.origin}/api/v1/assets`, { headers: { authorization: `Bearer ${t.adminKey}` }, signal: AbortSignal.timeout(5000) })
        expect(res.status).toBe(200)
        expect(performance.now() - started).toBeLessThan(4000)
      } finally {
        for (const socket of stalled) socket.destroy()
      }
      // A body that never finishes ends in 408 within Node's own request timeout (Fastify's default is none).
      expect(t.app.server.requestTimeout).toBe(300_000)
    })

    it('gives back the slots of pipelined requests whose connection closes before their answers (a malformed body ahead of them)', async () => {
      const listening = t.app.server.address()
      const base = new URL(listening !== null && typeof listening === 'object' ? `http://127.0.0.1:${listening.port}` : await t.app.listen({ port: 0, host: '127.0.0.1' }))
      const head = (method: string, path: string) => `${method} ${path} HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: Bearer ${t.adminKey}\r\n`
      for (let round = 0; round < 4; round++) {
        const socket = connect(Number(base.port), '127.0.0.1')
        await once(socket, 'connect')
        socket.resume()
        const closed = once(socket, 'close')
        const gets = Array.from({ length: 5 }, () => `${head('GET', '/api/v1/assets/00000000-0000-7000-8000-000000000000')}\r\n`).join('')
        socket.write(`${head('POST', '/api/v1/assets')}Content-Type: application/json\r\nContent-Length: 3\r\n\r\n{"a${gets}`)
        await closed
      }
      const started = performance.now()
      const res = await fetch(`${base.origin}/api/v1/assets`, { headers: { authorization: `Bearer ${t.adminKey}` }, signal: AbortSignal.timeout(5000) })
      expect(res.status).toBe(200)
      expect(performance.now() - started).toBeLessThan(4000)
    })

    it('caps one organization, queues the rest in order, and bounds the wait', async () => {
      const gate = new OrgConcurrency(2, 100, 2)
      const a1 = await gate.acquire('a')
      const a2 = await gate.acquire('a')
      // Another organization is never held up by the first.
      const b1 = await gate.acquire('b')
      const order: number[] = []
      const w1 = gate.acquire('a').then((release) => { order.push(1); return release })
      const w2 = gate.acquire('a').then((release) => { order.push(2); return release })
      // The queue is full (2): the next is turned away at once.
      await expect(gate.acquire('a')).rejects.toMatchObject({ def: { status: 503, code: 'service_unavailable' }, headers: { 'Retry-After': '1' } })
      a1()
      a1()
      const r1 = await w1
      expect(gate.running('a')).toBe(2)
      // The second waiter waits past its bound: 503.
      await expect(w2).rejects.toMatchObject({ def: { code: 'service_unavailable' } })
      r1()
      a2()
      b1()
      expect(order).toEqual([1])
      expect(gate.running('a')).toBe(0)
      expect(gate.running('b')).toBe(0)
    })
  })
}

/**
 * PostgreSQL (several connections; PGlite runs one statement at a time in the process and has no
 * statement timer): one organization floods the server with slow searches; its statements stop
 * at the statement timeout (503 query_timeout) and it holds at most half the pool, so another
 * organization's GET /assets answers within a second meanwhile.
 */
/**
 * Over HTTP (a Node request stream, destroyed once its body is read: inject's is not), a write
 * holds its organization's slot while it runs: with one slot, a second write waits for the first.
 */
describe.runIf(STORES.includes('postgres'))('postgres: a request with a body holds its organization\'s slot while it runs', () => {
  it('queues a second PATCH behind a first one waiting for a row lock, with KBIS_ORG_CONCURRENCY=1', { timeout: 120_000 }, async () => {
    const t = await createTestApp('postgres', ACME, { orgConcurrency: 1 })
    const url = new URL(process.env.TEST_DATABASE_URL!)
    url.searchParams.set('options', `-c search_path=${t.store.schema}`)
    const locker = await openDb({ databaseUrl: url.href, poolSize: 1 })
    try {
      const [a, b] = await Promise.all(['slot-a', 'slot-b'].map(async (name) => (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })).body.data.id as string)) as [string, string]
      const base = await t.app.listen({ port: 0, host: '127.0.0.1' })
      const patch = (id: string, name: string) => fetch(`${base}/api/v1/assets/${id}`, {
        method: 'PATCH', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name }),
      }).then((res) => ({ status: res.status, at: performance.now() }))
      let released = 0
      const held = locker.transaction(async (tx) => {
        await tx.query('SELECT id FROM assets WHERE id = $1 FOR UPDATE', [a])
        await new Promise((resolve) => setTimeout(resolve, 1500))
        released = performance.now()
      })
      await new Promise((resolve) => setTimeout(resolve, 200))
      const first = patch(a, 'slot-a2')
      await new Promise((resolve) => setTimeout(resolve, 300))
      const second = await patch(b, 'slot-b2')
      await held
      expect((await first).status).toBe(200)
      expect(second.status).toBe(200)
      // The second got the slot only when the first ended, after the lock was released.
      expect(second.at).toBeGreaterThan(released)
      expect(second.at).toBeGreaterThanOrEqual((await first).at)
    } finally {
      await locker.close()
      await t.close()
    }
  })
})

describe.runIf(STORES.includes('postgres'))('postgres: one organization cannot stall another', () => {
  let store: TestStore
  let db: Db
  let app: FastifyInstance
  let acmeKey = ''
  let betaKey = ''
  const config = loadConfig({}, { statementTimeoutMs: 400, poolSize: 4 })

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, ACME as unknown as SetupFile)
    const beta = structuredClone(ACME)
    beta.organization = { ...beta.organization, key: 'beta', name: 'Beta' }
    await applySetup(store.db, beta as unknown as SetupFile)
    db = await openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: store.schema!, poolSize: config.poolSize, statementTimeoutMs: config.statementTimeoutMs })
    app = await buildApp({ db, config })
    await app.ready()
    // Seeding runs without the short statement timeout (a loaded machine may take longer than 400 ms for a 1,000-row insert).
    const seeder = await buildApp({ db: store.db, config: loadConfig({}) })
    await seeder.ready()
    acmeKey = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'a', type: 'Admin', roles: ['all'] })).secret
    betaKey = (await createKeyFromCli(store.db, { org: 'beta', user: 'owner@acme.test', name: 'b', type: 'Admin', roles: ['all'] })).secret
    for (let batch = 0; batch < 4; batch++) {
      const items = Array.from({ length: 1000 }, (_, i) => ({ asset_type_key: 'note', name: `note ${batch}-${i} ${'lorem ipsum dolor sit amet '.repeat(4)}`, properties: { body: 'x'.repeat(200) } }))
      const res = await seeder.inject({ method: 'POST', url: '/api/v1/bulk/assets', payload: items, headers: { authorization: `Bearer ${acmeKey}` } })
      expect(res.statusCode).toBe(201)
    }
    await seeder.close()
    await app.inject({ method: 'POST', url: '/api/v1/assets', payload: { asset_type_key: 'note', name: 'beta note' }, headers: { authorization: `Bearer ${betaKey}` } })
  })
  afterAll(async () => {
    await app.close()
    await db.close()
    await store.drop()
  })

  it('stops a statement past the timeout (SQLSTATE 57014, answered 503 query_timeout)', async () => {
    await expect(db.query('SELECT pg_sleep(2)')).rejects.toMatchObject({ code: '57014' })
  })

  it('tells a write past the timeout (waiting for a lock) that it wrote nothing, not to narrow a filter', async () => {
    let release = () => undefined as void
    const released = new Promise<void>((resolve) => (release = resolve))
    let locked = () => undefined as void
    const lockTaken = new Promise<void>((resolve) => (locked = resolve))
    const holder = store.db.transaction(async (tx) => {
      await tx.query('LOCK TABLE assets IN ACCESS EXCLUSIVE MODE')
      locked()
      await released
    })
    try {
      await lockTaken
      const res = await app.inject({ method: 'POST', url: '/api/v1/assets', payload: { asset_type_key: 'note', name: 'waits' }, headers: { authorization: `Bearer ${betaKey}` } })
      expect(res.statusCode).toBe(503)
      expect(res.json().errors[0]).toMatchObject({ code: 'query_timeout',
        detail: "the write ran longer than the server's statement timeout (waiting for another write to the same records, or too large) and wrote nothing; retry it later, or send fewer items" })
    } finally {
      release()
      await holder
    }
    expect((await store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name = 'waits'")).rows[0]!.n).toBe(0)
  })

  it("answers the second organization within 1 s while the first floods with slow searches", async () => {
    // 360 case-insensitive `contains` over long names and bodies, none matching: each statement
    // scans every asset 360 times over (within the parser's bound on the total operand size).
    const slow = {
      filter: { or: Array.from({ length: 360 }, (_, i) => ({ field: i % 2 ? 'name' : 'properties.body', operator: 'contains', value: `zz${i}qq${'y'.repeat(20)}` })) },
      page: { count: 'exact' },
    }
    const flood = Array.from({ length: 12 }, () =>
      app.inject({ method: 'POST', url: '/api/v1/search/assets', payload: slow, headers: { authorization: `Bearer ${acmeKey}` } }))
    await new Promise((resolve) => setTimeout(resolve, 150))
    const timings: number[] = []
    for (let i = 0; i < 3; i++) {
      const start = Date.now()
      const res = await app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${betaKey}` } })
      timings.push(Date.now() - start)
      expect(res.statusCode).toBe(200)
      expect(res.json().data.map((a: { name: string }) => a.name)).toEqual(['beta note'])
    }
    expect(Math.max(...timings), JSON.stringify(timings)).toBeLessThan(1_000)
    const answers = await Promise.all(flood)
    const codes = answers.map((r) => (r.statusCode === 200 ? '200' : `${r.statusCode} ${r.json().errors[0].code}`))
    for (const code of codes) expect(['200', '503 query_timeout', '503 service_unavailable']).toContain(code)
    expect(codes).toContain('503 query_timeout')
    const timeout = answers.find((r) => r.statusCode === 503 && r.json().errors[0].code === 'query_timeout')!
    expect(timeout.json().errors[0].detail).toBe("the query ran longer than the server's statement timeout; narrow the filter (fewer or shorter conditions) or retry later")
    expect(timeout.body).not.toMatch(/cancel|statement_timeout|SELECT/i)
  })
})
