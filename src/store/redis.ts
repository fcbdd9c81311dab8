import { createRequire } from 'node:module'
import type { Redis, RedisOptions } from 'ioredis'
import { Outage } from './outage.js'

// ioredis, loaded by the first client: a server without REDIS_URL never loads it (≈ 70 ms of its start).
let RedisClient: typeof Redis | null = null

/**
 * An ioredis client for `REDIS_URL` that never serves another database than the URL's. ioredis
 * sends `SELECT <n>` as it connects and, when the server refuses it (a database number the server
 * does not have: "ERR DB index is out of range"), reports an error and uses the connection all the
 * same, on database 0: another application's keys, maybe. Here that refusal is kept, and
 * `refusal()` returns it, for the caller to treat Redis as unavailable (it falls back, and logs).
 */
export function connectRedis(url: string, options: RedisOptions): { redis: Redis; refusal(): Error | null } {
  RedisClient ??= (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis
  const redis = new RedisClient(url, options)
  const database = new URL(url).pathname.slice(1) || '0'
  let refusal: Error | null = null
  redis.on('error', (err: Error) => {
    if (/\bDB index\b|\binvalid DB\b/i.test(err.message)) {
      refusal = new Error(`REDIS_URL names database ${database}, which the Redis server refused (${err.message})`)
    }
  })
  return { redis, refusal: () => refusal }
}

/** After a Redis failure, it is left alone this long (the caller's fallback answers meanwhile). */
export const REDIS_RETRY_MS = 5_000

/** What {@link FailFastRedis.attempt} gives: Redis's answer, or none (Redis unavailable: fall back). */
export type RedisAttempt<T> = { ok: true; value: T } | { ok: false }

/**
 * Redis for state that has a fallback (the rate-limit counters, the read-after-write marks): never
 * waited for while it is down. A command is sent only while the connection is up (no offline
 * queue), ends after `commandTimeoutMs` (a Redis that stopped answering), and after a failure Redis
 * is left alone for REDIS_RETRY_MS, while ioredis reconnects in the background; the outage is
 * reported once (store/outage.ts). Only requests of the first moments wait for the first
 * connection, once, at most the command timeout.
 */
export class FailFastRedis {
  readonly redis: Redis
  private readonly outage = new Outage(REDIS_RETRY_MS)
  private readonly firstConnect: Promise<void>
  private readonly refusal: () => Error | null

  constructor(url: string, commandTimeoutMs = 2000) {
    const { redis, refusal } = connectRedis(url, {
      maxRetriesPerRequest: 1,
      commandTimeout: commandTimeoutMs,
      connectTimeout: commandTimeoutMs,
      enableOfflineQueue: false,
      retryStrategy: (times) => Math.min(times * 200, REDIS_RETRY_MS),
      lazyConnect: false,
    })
    this.redis = redis
    this.refusal = refusal
    this.firstConnect = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, commandTimeoutMs)
      timer.unref()
      const done = () => { clearTimeout(timer); resolve() }
      redis.once('ready', done)
      redis.once('error', done)
      redis.once('end', done)
    })
  }

  /** `command`'s answer, or `{ ok: false }` when Redis is down, refused or too slow (`onDown` told once per outage). */
  async attempt<T>(command: (redis: Redis) => Promise<T>, onDown: (err: unknown) => void): Promise<RedisAttempt<T>> {
    if (!this.outage.due) return { ok: false }
    if (this.redis.status !== 'ready') await this.firstConnect
    try {
      const refused = this.refusal()
      if (refused) throw refused
      if (this.redis.status !== 'ready') throw new Error(`Redis is not connected (${this.redis.status})`)
      const value = await command(this.redis)
      this.outage.answered()
      return { ok: true, value }
    } catch (err) {
      this.outage.failed(err, onDown)
      return { ok: false }
    }
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect())
  }
}
