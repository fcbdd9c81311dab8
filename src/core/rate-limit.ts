import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import { FailFastRedis } from '../store/redis.js'
import type { Db } from '../store/db.js'
import type { Config } from './config.js'
import { AppError, Errors } from './errors.js'

/**
 * Per-organization rate limit (CONTRACT §10): a fixed window of `windowSeconds`, aligned to the
 * epoch so that every process agrees on it, and one counter per (organization, window) shared by
 * all keys of the organization and all server processes on the same store.
 *
 * A counter hands out *positions*: the n-th request of the window has position n and is allowed
 * when n ≤ requests. Positions are unique across processes (the counter is atomic), so the quota
 * is never exceeded, whichever process serves the request.
 */
export interface RateRule {
  requests: number
  windowSeconds: number
}

export interface RateDecision {
  allowed: boolean
  limit: number
  remaining: number
  /** Seconds until the window ends. */
  reset: number
}

/**
 * An atomic shared counter: adds `n` to the organization's counter of a window, returns the new
 * total. `onError`: who is told of a failure the store recovers from (the request that met it).
 */
export interface CounterStore {
  add(orgId: string, windowStart: number, windowSeconds: number, n: number, onError?: (err: unknown) => void): Promise<number>
  close(): Promise<void>
}

/** One process only: PGlite (one process owns its data directory), and its fallback when Redis fails. */
export class MemoryCounters implements CounterStore {
  private readonly counts = new Map<string, { window: number; count: number }>()

  async add(orgId: string, windowStart: number, _windowSeconds: number, n: number): Promise<number> {
    const entry = this.counts.get(orgId)
    const count = (entry && entry.window === windowStart ? entry.count : 0) + n
    this.counts.set(orgId, { window: windowStart, count })
    return count
  }

  async close(): Promise<void> {}
}

/**
 * PostgreSQL: one atomic upsert per reservation (no transaction, no read-then-write race). The row
 * of a busy organization is a hot spot — each upsert holds its row lock until commit — so the
 * limiter reserves small batches of positions when one process sees many requests (see
 * RateLimiter.batchFor), and a single statement otherwise.
 */
export class PostgresCounters implements CounterStore {
  constructor(private readonly db: Db) {}

  async add(orgId: string, windowStart: number, _windowSeconds: number, n: number): Promise<number> {
    const result = await this.db.query<{ count: number }>(
      `INSERT INTO rate_limit_counters AS c (org_id, window_start, count) VALUES ($1, $2, $3)
       ON CONFLICT (org_id, window_start) DO UPDATE SET count = c.count + EXCLUDED.count
       RETURNING count`,
      [orgId, windowStart, n],
    )
    const count = Number(result.rows[0]!.count)
    // The reservation that opened the window removes the organization's old windows: once per
    // window and organization, off the request path.
    if (count === n) {
      void this.db.query('DELETE FROM rate_limit_counters WHERE org_id = $1 AND window_start < $2', [orgId, windowStart]).catch(() => undefined)
    }
    return count
  }

  async close(): Promise<void> {}
}

// INCRBY and the expiry in one atomic script: a counter never outlives its window (plus slack for
// clock differences between processes), and no separate round trip sets the TTL.
const REDIS_ADD = `
local c = redis.call('INCRBY', KEYS[1], ARGV[1])
if c == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return c`

type RedisWithAdd = Redis & { kbisRateAdd(key: string, n: number, ttlMs: number): Promise<number> }

/**
 * Redis (REDIS_URL). When Redis cannot answer, requests are counted by the fallback — the shared
 * PostgreSQL counters when the store is PostgreSQL (so that processes still share one quota), in
 * process on PGlite — rather than refused: an unavailable limiter should not take the API down
 * with it. It fails fast, circuit-breaker style (store/redis.ts FailFastRedis): no request waits
 * for Redis while it is down.
 */
export class RedisCounters implements CounterStore {
  private readonly shared: FailFastRedis

  constructor(
    url: string,
    private readonly prefix = 'kbis:rl:',
    private readonly onError: (err: unknown) => void = () => undefined,
    commandTimeoutMs = 2000,
    private readonly fallback: CounterStore = new MemoryCounters(),
  ) {
    this.shared = new FailFastRedis(url, commandTimeoutMs)
    this.shared.redis.defineCommand('kbisRateAdd', { numberOfKeys: 1, lua: REDIS_ADD })
  }

  async add(orgId: string, windowStart: number, windowSeconds: number, n: number, onError = this.onError): Promise<number> {
    const counted = await this.shared.attempt(
      async (redis) => Number(await (redis as RedisWithAdd).kbisRateAdd(`${this.prefix}${orgId}:${windowStart}`, n, windowSeconds * 2000 + 60_000)),
      onError,
    )
    return counted.ok ? counted.value : this.fallback.add(orgId, windowStart, windowSeconds, n)
  }

  async close(): Promise<void> {
    await this.shared.close()
    await this.fallback.close()
  }
}

/** What one process knows of an organization's current window. */
interface OrgSlots {
  window: number
  limit: number
  /** Next position to hand out, and the last position reserved by this process. */
  next: number
  end: number
  /** The window's quota is spent: answer 429 without asking the store again. */
  exhausted: boolean
  batch: number
  lastReserveAt: number
  inflight: Promise<void> | null
}

export interface RateLimiterOptions {
  /** Largest batch of positions one reservation takes (1 = one store round trip per request). */
  maxBatch?: number
  now?: () => number
  /** What a request logs when the counters fail over to their fallback. */
  failoverMessage?: string
}

/**
 * Hands out positions from a CounterStore. A process that sees a burst reserves a few positions at
 * once (doubling while reservations come faster than every 50 ms, up to `maxBatch` and at most
 * 0.5 % of the quota), so a busy organization costs one store round trip per batch, not per
 * request; at ordinary rates the batch is 1 and every request is counted exactly. Positions a
 * process reserved but did not use when the window ends are lost: at most maxBatch per process per
 * window, and the limit is never exceeded.
 */
export class RateLimiter {
  private readonly slots = new Map<string, OrgSlots>()
  private readonly maxBatch: number
  private readonly now: () => number

  /** What a request logs when the counters fail over. */
  readonly failoverMessage: string

  constructor(readonly store: CounterStore, options: RateLimiterOptions = {}) {
    this.failoverMessage = options.failoverMessage ?? 'rate-limit counters unavailable; counting elsewhere for a few seconds'
    this.maxBatch = options.maxBatch ?? 32
    this.now = options.now ?? Date.now
  }

  /** `onError`: told when the counters fail over (the request's logger, so that its line carries the request id). */
  async hit(orgId: string, rule: RateRule, onError?: (err: unknown) => void): Promise<RateDecision> {
    const now = this.now()
    const windowMs = rule.windowSeconds * 1000
    const window = Math.floor(now / windowMs) * rule.windowSeconds
    const reset = Math.max(1, Math.ceil((window * 1000 + windowMs - now) / 1000))
    const slots = this.slotsOf(orgId, window, rule.requests)
    const deny: RateDecision = { allowed: false, limit: rule.requests, remaining: 0, reset }
    while (slots.next > slots.end) {
      if (slots.exhausted) return deny
      slots.inflight ??= this.reserve(orgId, slots, rule, onError).finally(() => { slots.inflight = null })
      await slots.inflight
    }
    const position = slots.next++
    if (position > rule.requests) {
      slots.exhausted = true
      return deny
    }
    return { allowed: true, limit: rule.requests, remaining: rule.requests - position, reset }
  }

  close(): Promise<void> {
    return this.store.close()
  }

  private slotsOf(orgId: string, window: number, limit: number): OrgSlots {
    const slots = this.slots.get(orgId)
    if (slots && slots.window === window && slots.limit === limit) return slots
    // A new window (or a changed quota) starts from nothing; the batch size carries over.
    const fresh: OrgSlots = {
      window, limit, next: 1, end: 0, exhausted: false, batch: slots?.batch ?? 1, lastReserveAt: slots?.lastReserveAt ?? 0, inflight: null,
    }
    this.slots.set(orgId, fresh)
    return fresh
  }

  private async reserve(orgId: string, slots: OrgSlots, rule: RateRule, onError?: (err: unknown) => void): Promise<void> {
    const n = this.batchFor(slots, rule.requests)
    const total = await this.store.add(orgId, slots.window, rule.windowSeconds, n, onError)
    slots.next = total - n + 1
    slots.end = total
  }

  private batchFor(slots: OrgSlots, limit: number): number {
    const max = Math.max(1, Math.min(this.maxBatch, Math.floor(limit / 200)))
    const now = Date.now()
    const busy = now - slots.lastReserveAt < 50
    slots.batch = busy ? Math.min(max, slots.batch * 2) : Math.max(1, Math.floor(slots.batch / 2))
    slots.batch = Math.min(slots.batch, max)
    slots.lastReserveAt = now
    return slots.batch
  }
}

/** What is logged when Redis fails and the counting moves to the fallback. */
export function redisFailoverMessage(db: Db): string {
  return `rate-limit Redis unavailable; counting in ${db.kind === 'postgres' ? 'PostgreSQL (shared by every process)' : 'process'} for a few seconds`
}

/** Redis when configured (falling back to the store's counters while it is down); else the database on PostgreSQL; in process on PGlite. */
export function createRateLimiter(db: Db, config: Config, onError?: (err: unknown) => void): RateLimiter {
  if (config.redisUrl) {
    const fallback = db.kind === 'postgres' ? new PostgresCounters(db) : new MemoryCounters()
    return new RateLimiter(new RedisCounters(config.redisUrl, undefined, onError, undefined, fallback), { failoverMessage: redisFailoverMessage(db) })
  }
  if (db.kind === 'postgres') return new RateLimiter(new PostgresCounters(db))
  return new RateLimiter(new MemoryCounters(), { maxBatch: 1 })
}

/**
 * Counts an authenticated request against its organization's quota and sets the RateLimit-*
 * headers, which stay on the reply whatever it answers; over quota → 429 with Retry-After.
 */
export async function enforceRateLimit(limiter: RateLimiter, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { orgId, rateLimit } = request.auth
  const decision = await limiter.hit(orgId, rateLimit, (err) => request.log.warn({ err }, limiter.failoverMessage))
  reply.header('RateLimit-Limit', String(decision.limit))
  reply.header('RateLimit-Remaining', String(decision.remaining))
  reply.header('RateLimit-Reset', String(decision.reset))
  if (!decision.allowed) {
    throw new AppError(
      Errors.RATE_LIMIT_EXCEEDED,
      `the organization's quota of ${decision.limit} requests per ${rateLimit.windowSeconds} s is spent; retry in ${decision.reset} s`,
      { 'Retry-After': String(decision.reset) },
    )
  }
}
