import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { startServerProcess, type ServerProcess } from '../helpers/processes.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { MemoryCounters, PostgresCounters, RateLimiter, RedisCounters, createRateLimiter } from '../../src/core/rate-limit.js'

// A day-long window: the test never straddles two windows (they are aligned to the epoch).
const WINDOW = 86_400

function withQuota(requests: number, orgKey = 'acme'): SetupFile {
  const setup = structuredClone(ACME)
  setup.organization = { ...setup.organization, key: orgKey, rate_limit: { requests, window_seconds: WINDOW } }
  return setup as unknown as SetupFile
}

const header = (res: { headers: Record<string, unknown> }, name: string) => res.headers[name.toLowerCase()]

for (const store of STORES) {
  describe(`${store}: rate limit`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, withQuota(5))
    })
    afterAll(async () => t.close())

    it('counts every authenticated request of the organization, whatever the key and the answer', async () => {
      const viewer = await t.givenKey({ type: 'Viewer' })
      const answers = [
        await t.request('GET', '/api/v1/assets'),
        await t.request('GET', '/api/v1/assets', { key: viewer }),
        await t.request('GET', '/api/v1/assets/00000000-0000-7000-8000-000000000000'),
        await t.request('POST', '/api/v1/assets', { key: viewer, body: { asset_type_key: 'note', name: 'x' } }),
      ]
      expect(answers.map((r) => r.status)).toEqual([200, 200, 404, 403])
      expect(answers.map((r) => header(r, 'RateLimit-Remaining'))).toEqual(['4', '3', '2', '1'])
      for (const res of answers) {
        expect(header(res, 'RateLimit-Limit')).toBe('5')
        const reset = Number(header(res, 'RateLimit-Reset'))
        expect(reset).toBeGreaterThan(0)
        expect(reset).toBeLessThanOrEqual(WINDOW)
      }
    })

    it('does not count or label unauthenticated requests', async () => {
      const res = await t.request('GET', '/api/v1/assets', { key: null })
      expect(res.status).toBe(401)
      expect(header(res, 'RateLimit-Limit')).toBeUndefined()
      expect(header(res, 'RateLimit-Remaining')).toBeUndefined()
    })

    it('answers 429 rate_limit_exceeded with Retry-After once the quota is spent', async () => {
      expect((await t.request('GET', '/api/v1/assets')).status).toBe(200)
      const res = await t.request('GET', '/api/v1/assets')
      expect(res.status).toBe(429)
      const retryAfter = header(res, 'Retry-After') as string
      expect(Number(retryAfter)).toBeGreaterThan(0)
      expect(header(res, 'RateLimit-Remaining')).toBe('0')
      expect(header(res, 'RateLimit-Reset')).toBe(retryAfter)
      expect(res.body).toEqual({
        errors: [{
          status: '429', code: 'rate_limit_exceeded',
          detail: `the organization's quota of 5 requests per ${WINDOW} s is spent; retry in ${retryAfter} s`,
        }],
      })
      // Every key of the organization shares the quota.
      const other = await t.givenKey({ type: 'Admin' })
      expect((await t.request('GET', '/api/v1/roles', { key: other })).status).toBe(429)
    })

    it('keeps the quota per organization', async () => {
      await applySetup(t.store.db, withQuota(3, 'beta'))
      const key = (await createKeyFromCli(t.store.db, { org: 'beta', user: 'owner@acme.test', name: 'b', type: 'Viewer', roles: ['all'] })).secret
      const res = await t.request('GET', '/api/v1/assets', { key })
      expect(res.status).toBe(200)
      expect(header(res, 'RateLimit-Limit')).toBe('3')
      expect(header(res, 'RateLimit-Remaining')).toBe('2')
    })
  })
}

async function get(base: string, path: string, key: string): Promise<{ status: number; remaining: string | null }> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } })
  await res.arrayBuffer()
  return { status: res.status, remaining: res.headers.get('ratelimit-remaining') }
}

describe.runIf(STORES.includes('postgres'))('postgres: rate limit shared by two server processes', () => {
  let store: TestStore
  let servers: ServerProcess[] = []
  let key: string

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, withQuota(10))
    key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'p', type: 'Viewer', roles: ['all'] })).secret
    const env = { DATABASE_URL: process.env.TEST_DATABASE_URL, KBIS_TEST_SCHEMA: store.schema! }
    servers = await Promise.all([startServerProcess(env), startServerProcess(env)])
  })
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await store?.drop()
  })

  it('spends one quota across both processes', async () => {
    const [a, b] = servers.map((s) => s.address) as [string, string]
    expect(a).not.toBe(b)
    const seen: { status: number; remaining: string | null }[] = []
    // Alternate between the processes: each answer counts what the other one served.
    for (let i = 0; i < 12; i++) seen.push(await get(i % 2 === 0 ? a : b, '/api/v1/assets', key))
    expect(seen.map((r) => r.status)).toEqual([...Array(10).fill(200), 429, 429])
    expect(seen.map((r) => r.remaining)).toEqual(['9', '8', '7', '6', '5', '4', '3', '2', '1', '0', '0', '0'])
    const counters = await store.db.query<{ count: number }>('SELECT count FROM rate_limit_counters')
    // Each process asked once more before it knew the quota was spent; then it stops asking.
    expect(counters.rows.map((r) => Number(r.count))).toEqual([12])
  })
})

const REDIS_URL = process.env.TEST_REDIS_URL

describe.runIf(REDIS_URL && STORES.length > 0)('redis: rate limit shared through Redis', () => {
  const prefix = `kbis-test:${randomBytes(6).toString('hex')}:`
  let store: TestStore
  let apps: Awaited<ReturnType<typeof buildApp>>[] = []
  let key: string
  let redis: Redis

  beforeAll(async () => {
    store = await createTestStore(STORES[0]!)
    await applySetup(store.db, withQuota(4))
    key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'r', type: 'Viewer', roles: ['all'] })).secret
    // Two apps, each with its own Redis connection (as two processes would have), one key prefix.
    const config = loadConfig({}, { redisUrl: REDIS_URL })
    for (let i = 0; i < 2; i++) {
      // A generous command timeout: on a loaded test machine a slow answer would fall back to
      // counting in process (by design) and the apps would no longer share the count.
      const counters = new RedisCounters(REDIS_URL!, prefix, (err) => { throw err }, 30_000)
      apps.push(await buildApp({ db: store.db, config, rateLimiter: new RateLimiter(counters) }))
    }
    redis = new Redis(REDIS_URL!)
  })
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    await redis.quit()
    for (const app of apps) await app.close()
    await store?.drop()
  })

  it('spends one quota across both apps and keeps the counter under the prefix with an expiry', async () => {
    const statuses: number[] = []
    const remaining: unknown[] = []
    for (let i = 0; i < 6; i++) {
      const res = await apps[i % 2]!.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: `Bearer ${key}` } })
      statuses.push(res.statusCode)
      remaining.push(res.headers['ratelimit-remaining'])
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429])
    expect(remaining).toEqual(['3', '2', '1', '0', '0', '0'])
    const keys = await redis.keys(`${prefix}*`)
    expect(keys).toHaveLength(1)
    expect(Number(await redis.get(keys[0]!))).toBe(6)
    expect(await redis.pttl(keys[0]!)).toBeGreaterThan(WINDOW * 1000)
  })

  it('never counts in another database than the URL\'s: one the server refuses is an outage (the fallback counts, the error says why)', async () => {
    const url = new URL(REDIS_URL!)
    url.pathname = '/9999'
    const errors: string[] = []
    const counters = new RedisCounters(url.href, prefix, (err) => void errors.push((err as Error).message), 30_000, new MemoryCounters())
    try {
      const orgId = randomBytes(8).toString('hex')
      expect(await counters.add(orgId, 1000, 60, 1)).toBe(1)
      expect(await counters.add(orgId, 1000, 60, 1)).toBe(2)
      expect(errors[0]).toMatch(/^REDIS_URL names database 9999, which the Redis server refused \(ERR DB index is out of range\)$/)
      // Not in database 0, where ioredis would have sent it.
      const zero = new URL(REDIS_URL!)
      zero.pathname = '/0'
      const db0 = new Redis(zero.href)
      try {
        expect(await db0.keys(`${prefix}${orgId}*`)).toEqual([])
      } finally {
        await db0.quit()
      }
    } finally {
      await counters.close()
    }
  })

  it('chooses Redis when config.redisUrl is set, else the store', async () => {
    const pick = (redisUrl: string | undefined) => createRateLimiter(store.db, loadConfig({}, { redisUrl }))
    const redisLimiter = pick(REDIS_URL)
    expect(redisLimiter.store).toBeInstanceOf(RedisCounters)
    await redisLimiter.close()
    expect(pick(undefined).store).toBeInstanceOf(store.db.kind === 'postgres' ? PostgresCounters : MemoryCounters)
  })
})
