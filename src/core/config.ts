/**
 * Service configuration: environment variables, overridden by CLI flags. Documented in
 * docs/configuration.md and the README; every variable here is listed there.
 */
export interface Config {
  host: string
  port: number
  /** PostgreSQL connection string; when unset, the embedded PGlite store in `dataDir` is used. */
  databaseUrl: string | undefined
  dataDir: string
  /** Redis URL for the shared rate-limit counters; when unset the store keeps them. */
  redisUrl: string | undefined
  /** Addresses/CIDRs of reverse proxies whose X-Forwarded-For is trusted (CONTRACT §10). */
  trustedProxies: string[]
  /** Largest accepted body, in bytes, for single-record requests. */
  bodyLimit: number
  /** Largest accepted body, in bytes, for bulk requests (10,000 realistic items fit). */
  bulkBodyLimit: number
  logLevel: string
  /** PostgreSQL pool size. */
  poolSize: number
  /** A streaming replica of DATABASE_URL for lists, search and analytics (CONTRACT §17). */
  databaseReadUrl: string | undefined
  /** An API key that wrote this recently reads from the primary, not the replica. */
  readAfterWriteMs: number
  /** Seconds a shutdown waits for requests in flight before it closes their connections. */
  shutdownTimeoutSeconds: number
  /** Port of the Prometheus endpoint (`--metrics-port`); none when undefined. */
  metricsPort: number | undefined
  /** The URL clients reach the API at (`KBIS_PUBLIC_URL`, no trailing slash); `links` start with it, else they are relative paths. */
  publicUrl: string | undefined
  /** Origins allowed to call the API from a browser (`KBIS_CORS_ORIGINS`); none (CORS off) when empty. */
  corsOrigins: string[]
}

export class ConfigError extends Error {}

function intFrom(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got "${raw}"`)
  }
  return value
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  return {
    host: env.HOST || '127.0.0.1',
    port: intFrom('PORT', env.PORT, 8080, 0, 65535),
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.KBIS_DATA_DIR || './data',
    redisUrl: env.REDIS_URL || undefined,
    trustedProxies: (env.KBIS_TRUSTED_PROXIES ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    bodyLimit: intFrom('KBIS_BODY_LIMIT', env.KBIS_BODY_LIMIT, 1024 * 1024, 1024, 1024 ** 3),
    // 10,000 realistic items (8 properties, a client_ref, an embedded relationship) are ~4 MB
    // compact and ~6.5 MB pretty-printed: 8 MiB (~840 bytes an item) leaves room, not more.
    bulkBodyLimit: intFrom('KBIS_BULK_BODY_LIMIT', env.KBIS_BULK_BODY_LIMIT, 8 * 1024 * 1024, 1024, 1024 ** 3),
    logLevel: env.LOG_LEVEL || 'info',
    poolSize: intFrom('KBIS_POOL_SIZE', env.KBIS_POOL_SIZE, 10, 1, 1000),
    databaseReadUrl: env.DATABASE_READ_URL || undefined,
    readAfterWriteMs: intFrom('KBIS_READ_AFTER_WRITE_MS', env.KBIS_READ_AFTER_WRITE_MS, 2000, 0, 3_600_000),
    shutdownTimeoutSeconds: intFrom('KBIS_SHUTDOWN_TIMEOUT', env.KBIS_SHUTDOWN_TIMEOUT, 30, 0, 3600),
    metricsPort: env.KBIS_METRICS_PORT ? intFrom('KBIS_METRICS_PORT', env.KBIS_METRICS_PORT, 0, 0, 65535) : undefined,
    publicUrl: publicUrlFrom(env.KBIS_PUBLIC_URL),
    corsOrigins: (env.KBIS_CORS_ORIGINS ?? '').split(',').map((s) => s.trim().replace(/\/+$/, '')).filter(Boolean),
    ...overrides,
  }
}

function publicUrlFrom(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConfigError(`KBIS_PUBLIC_URL: must be an absolute http(s) URL such as https://inventory.example.com, got "${raw}"`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`KBIS_PUBLIC_URL: must start with http:// or https://, got "${raw}"`)
  if (url.search || url.hash) throw new ConfigError(`KBIS_PUBLIC_URL: must not carry a query or fragment, got "${raw}"`)
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '')
}
