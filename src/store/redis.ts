import { Redis, type RedisOptions } from 'ioredis'

/**
 * An ioredis client for `REDIS_URL` that never serves another database than the URL's. ioredis
 * sends `SELECT <n>` as it connects and, when the server refuses it (a database number the server
 * does not have: "ERR DB index is out of range"), reports an error and uses the connection all the
 * same, on database 0: another application's keys, maybe. Here that refusal is kept, and
 * `refusal()` returns it, for the caller to treat Redis as unavailable (it falls back, and logs).
 */
export function connectRedis(url: string, options: RedisOptions): { redis: Redis; refusal(): Error | null } {
  const redis = new Redis(url, options)
  const database = new URL(url).pathname.slice(1) || '0'
  let refusal: Error | null = null
  redis.on('error', (err: Error) => {
    if (/\bDB index\b|\binvalid DB\b/i.test(err.message)) {
      refusal = new Error(`REDIS_URL names database ${database}, which the Redis server refused (${err.message})`)
    }
  })
  return { redis, refusal: () => refusal }
}
