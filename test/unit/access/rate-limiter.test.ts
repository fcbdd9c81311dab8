import { describe, expect, it } from 'vitest'
import { MemoryCounters, RateLimiter, RedisCounters, type CounterStore } from '../../../src/core/rate-limit.js'

/** A shared counter that records every reservation (one store round trip each). */
class CountingStore implements CounterStore {
  readonly inner = new MemoryCounters()
  readonly calls: number[] = []

  async add(orgId: string, windowStart: number, windowSeconds: number, n: number): Promise<number> {
    this.calls.push(n)
    await new Promise((resolve) => setTimeout(resolve, 1))
    return this.inner.add(orgId, windowStart, windowSeconds, n)
  }

  async close(): Promise<void> {}
}

describe('RateLimiter', () => {
  const rule = { requests: 3, windowSeconds: 60 }

  it('allows `requests` per fixed window, then denies until the window ends', async () => {
    let now = Date.UTC(2026, 0, 1, 0, 0, 10)
    const limiter = new RateLimiter(new MemoryCounters(), { now: () => now })
    const decisions = []
    for (let i = 0; i < 4; i++) decisions.push(await limiter.hit('org', rule))
    expect(decisions).toEqual([
      { allowed: true, limit: 3, remaining: 2, reset: 50 },
      { allowed: true, limit: 3, remaining: 1, reset: 50 },
      { allowed: true, limit: 3, remaining: 0, reset: 50 },
      { allowed: false, limit: 3, remaining: 0, reset: 50 },
    ])
    now += 49_500
    expect(await limiter.hit('org', rule)).toEqual({ allowed: false, limit: 3, remaining: 0, reset: 1 })
    now += 500
    expect(await limiter.hit('org', rule)).toEqual({ allowed: true, limit: 3, remaining: 2, reset: 60 })
  })

  it('keeps one count per organization', async () => {
    const limiter = new RateLimiter(new MemoryCounters())
    await limiter.hit('a', rule)
    await limiter.hit('a', rule)
    expect((await limiter.hit('b', rule)).remaining).toBe(2)
  })

  it('never lets two limiters on one store exceed the quota together, even with bursts and batches', async () => {
    const store = new CountingStore()
    const big = { requests: 1000, windowSeconds: 3600 }
    const limiters = [new RateLimiter(store), new RateLimiter(store)]
    const decisions = await Promise.all(Array.from({ length: 1500 }, (_, i) => limiters[i % 2]!.hit('org', big)))
    expect(decisions.filter((d) => d.allowed).length).toBeLessThanOrEqual(1000)
    // A burst reserves batches: far fewer store round trips than requests.
    expect(store.calls.length).toBeLessThan(400)
    expect(Math.max(...store.calls)).toBeLessThanOrEqual(5)
  })

  it('counts exactly, one position per request, at ordinary rates', async () => {
    const store = new CountingStore()
    const limiter = new RateLimiter(store)
    for (let i = 0; i < 5; i++) {
      await limiter.hit('org', { requests: 100_000, windowSeconds: 60 })
      await new Promise((resolve) => setTimeout(resolve, 60))
    }
    expect(store.calls).toEqual([1, 1, 1, 1, 1])
  })

  it('stops asking the store once the window is spent', async () => {
    const store = new CountingStore()
    const limiter = new RateLimiter(store)
    for (let i = 0; i < 10; i++) await limiter.hit('org', rule)
    expect(store.calls).toHaveLength(4)
  })
})

describe('RedisCounters', () => {
  it('counts in process when Redis cannot answer, and leaves Redis alone for a while', async () => {
    const errors: unknown[] = []
    const counters = new RedisCounters('redis://127.0.0.1:1', 'kbis-test:', (err) => errors.push(err))
    try {
      const started = Date.now()
      expect(await counters.add('org', 0, 60, 1)).toBe(1)
      expect(await counters.add('org', 0, 60, 2)).toBe(3)
      expect(errors).toHaveLength(1)
      expect(Date.now() - started).toBeLessThan(5_000)
    } finally {
      await counters.close()
    }
  })
})
