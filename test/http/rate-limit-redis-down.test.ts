import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { PostgresCounters, MemoryCounters, RedisCounters } from '../../src/core/rate-limit.js'

const WINDOW = 86_400

/** A port nothing listens on: bound, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/**
 * An unreachable Redis: the limiter counts in the store's shared counters (PostgreSQL) or in
 * process (PGlite), fails fast (no per-request timeout), and the quota stays exact.
 */
for (const store of STORES) {
  describe(`${store}: rate limit while Redis is unreachable`, () => {
    let db: TestStore
    const apps: FastifyInstance[] = []
    let key = ''
    const warnings: Record<string, unknown>[] = []

    beforeAll(async () => {
      db = await createTestStore(store)
      const setup = structuredClone(ACME)
      setup.organization = { ...setup.organization, rate_limit: { requests: 10, window_seconds: WINDOW } }
      await applySetup(db.db, setup as unknown as SetupFile)
      key = (await createKeyFromCli(db.db, { org: 'acme', user: 'owner@acme.test', name: 'r', type: 'Viewer', roles: ['all'] })).secret
      const config = loadConfig({}, { redisUrl: `redis://127.0.0.1:${await closedPort()}` })
      // Two apps, each with its own pool (as two processes on one PostgreSQL); one on PGlite,
      // whose data directory belongs to one process.
      for (let i = 0; i < (store === 'postgres' ? 2 : 1); i++) {
        const own = store === 'postgres'
          ? (await import('../../src/store/db.js')).openDb({ databaseUrl: process.env.TEST_DATABASE_URL!, schema: db.schema!, poolSize: 3 })
          : Promise.resolve(db.db)
        const app = await buildApp({ db: await own, config, logger: { level: 'warn', stream: { write: (line: string) => { warnings.push(JSON.parse(line)) } } } })
        await app.ready()
        apps.push(app)
      }
    })
    afterAll(async () => {
      for (const app of apps) {
        await app.close()
        if (app.db !== db.db) await app.db.close()
      }
      await db.drop()
    })

    it('falls back to the shared store counters: one exact quota across processes, answered quickly', async () => {
      const statuses: number[] = []
      const remaining: unknown[] = []
      let slowest = 0
      for (let i = 0; i < 14; i++) {
        const start = Date.now()
        const res = await apps[i % apps.length]!.inject({ method: 'GET', url: '/api/v1/metamodel/asset-types', headers: { authorization: `Bearer ${key}`, 'x-request-id': `rl-${i}` } })
        // The first request of each app also loads its key and metamodel caches: not counted.
        if (i >= apps.length) slowest = Math.max(slowest, Date.now() - start)
        statuses.push(res.statusCode)
        remaining.push(res.headers['ratelimit-remaining'])
      }
      expect(statuses).toEqual([...Array(10).fill(200), 429, 429, 429, 429])
      expect(remaining).toEqual(['9', '8', '7', '6', '5', '4', '3', '2', '1', '0', '0', '0', '0', '0'])
      // No request waits for a Redis timeout: a refused connection is known at once.
      expect(slowest).toBeLessThan(1_500)
      if (store === 'postgres') {
        const counters = await db.db.query<{ count: number }>('SELECT count FROM rate_limit_counters')
        expect(counters.rows.map((r) => Number(r.count))).toEqual([12])
      }
      // Said on the line of the request that met it: with its request id.
      const failovers = warnings.filter((w) => /^rate-limit Redis unavailable; counting in (PostgreSQL|process)/.test(String(w.msg)))
      expect(failovers.length).toBeGreaterThan(0)
      for (const w of failovers) expect(String(w.request_id)).toMatch(/^rl-\d+$/)
    })

    it('answers quickly for as long as Redis stays down (no 2 s timeout per request)', async () => {
      const started = Date.now()
      for (let i = 0; i < 20; i++) {
        const res = await apps[i % apps.length]!.inject({ method: 'GET', url: '/api/v1/metamodel/asset-types', headers: { authorization: `Bearer ${key}` } })
        expect(res.statusCode).toBe(429)
      }
      expect(Date.now() - started).toBeLessThan(2_000)
    })

    it('gives RedisCounters the store counters as fallback', async () => {
      const counters = new RedisCounters(`redis://127.0.0.1:${await closedPort()}`, 'kbis-test:', () => undefined, 2000,
        store === 'postgres' ? new PostgresCounters(db.db) : new MemoryCounters())
      const start = Date.now()
      const orgId = (await db.db.query<{ id: string }>("SELECT id FROM organizations WHERE key = 'acme'")).rows[0]!.id
      const window = Math.floor(Date.now() / 1000 / WINDOW) * WINDOW + WINDOW * 10
      expect(await counters.add(orgId, window, WINDOW, 1)).toBe(1)
      expect(await counters.add(orgId, window, WINDOW, 2)).toBe(3)
      expect(Date.now() - start).toBeLessThan(1_500)
      await counters.close()
    })

    it('tells an outage once: a retry after the back-off that fails again is the same outage', async () => {
      const told: unknown[] = []
      const counters = new RedisCounters(`redis://127.0.0.1:${await closedPort()}`, 'kbis-test:', (err) => told.push(err), 2000, new MemoryCounters())
      const realNow = Date.now
      try {
        expect(await counters.add('org', 0, WINDOW, 1)).toBe(1)
        expect(told).toHaveLength(1)
        // Past the back-off (5 s): Redis is tried again, still refused.
        const later = realNow() + 6_000
        vi.spyOn(Date, 'now').mockImplementation(() => later)
        expect(await counters.add('org', 0, WINDOW, 1)).toBe(2)
        expect(told).toHaveLength(1)
      } finally {
        vi.restoreAllMocks()
        await counters.close()
      }
    })
  })
}
