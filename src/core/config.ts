/**
 * Service configuration: environment variables, overridden by CLI flags. Documented in
 * docs/configuration.md, which lists every variable here (the README, the common ones).
 */
import { isIP } from 'node:net'
import { isAddressOrRange } from './ip-ranges.js'
import { DEFAULT_PG_PARALLEL_SETUP_COST, DEFAULT_PGLITE_SHARED_BUFFERS_MB } from '../store/tuning.js'

export interface Config {
  host: string
  port: number
  /** PostgreSQL connection string; when unset, the embedded PGlite store in `dataDir` is used. */
  databaseUrl: string | undefined
  dataDir: string
  /** PGlite's buffer pool in MB (`KBIS_PGLITE_SHARED_BUFFERS_MB`), all of it resident from the start. */
  pgliteSharedBuffersMb: number
  /**
   * V8 favours a small heap over speed in the server's process (`KBIS_OPTIMIZE_FOR_SIZE`);
   * undefined: on with the embedded store, off with PostgreSQL (ops/heap.ts, decision 0016).
   */
  optimizeForSize: boolean | undefined
  /**
   * The step by which V8 lets its old generation grow past what a full collection left, in percent
   * (`KBIS_HEAP_GROWTH_PERCENT`, 0–300); undefined: 30 unless V8 optimizes for size; 0: V8's own
   * factor (ops/heap.ts, decision 0028).
   */
  heapGrowthPercent: number | undefined
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
  /** How long opening the store waits for PostgreSQL (DATABASE_URL) to answer a first connection, in ms. */
  connectTimeoutMs: number
  /** PostgreSQL `statement_timeout` of every pooled connection, in ms (0 = none); past it → 503 query_timeout. */
  statementTimeoutMs: number
  /**
   * PostgreSQL `parallel_setup_cost` of every pooled connection (`KBIS_PG_PARALLEL_SETUP_COST`);
   * undefined (`server`): the server's own setting. Decision 0019.
   */
  pgParallelSetupCost: number | undefined
  /** Requests of one organization served at once by one process; more wait (see core/org-concurrency.ts). 0 = half the pool. */
  orgConcurrency: number
  /** Rows of results (filtered counts, analytics answers) remembered until the organization's data changes (counts/cache.ts); 0 = none. */
  countCacheSize: number
  /** Minutes a console session lives without a request (KBIS_CONSOLE_IDLE_MINUTES). */
  consoleIdleMinutes: number
  /** Days events are kept (CONTRACT §13); 0 keeps them forever. */
  eventRetentionDays: number
  /** How often the event relay looks for events to stamp, in ms (writes of this process wake it at once). */
  eventRelayIntervalMs: number
  /** NATS server for the JetStream event sink; none when undefined. */
  natsUrl: string | undefined
  /** JetStream stream the events are published to (created when absent). */
  natsStream: string
  /** Seconds between webhook delivery attempts (CONTRACT §14); its length is the number of retries. */
  webhookRetrySchedule: number[]
  /** Allow webhook URLs on loopback, private, link-local and unique-local addresses. */
  webhookAllowPrivate: boolean
  /** A webhook receiver must answer 2xx within this many milliseconds (CONTRACT §14: 15 s). */
  webhookTimeoutMs: number
  /** How often the webhook sender looks for due deliveries of other processes and of retries. */
  webhookPollMs: number
  /** Webhook deliveries in flight at once in this process. */
  webhookConcurrency: number
  /** The URL clients reach the API at (`KBIS_PUBLIC_URL`, no trailing slash); `links` start with it, else they are relative paths. */
  publicUrl: string | undefined
  /** Origins allowed to call the API from a browser (`KBIS_CORS_ORIGINS`); none (CORS off) when empty. */
  corsOrigins: string[]
}

export class ConfigError extends Error {}

/**
 * Plain decimal digits as a number, else null. `Number()` alone took `' '` (0), `1e3` and
 * `0x4000` as numbers: a blank PORT listened on a random port.
 */
export function decimalInteger(raw: string): number | null {
  return /^[0-9]+$/.test(raw) ? Number(raw) : null
}

function intFrom(name: string, raw: string | undefined, fallback: number, min: number, max: number, orWord?: string): number {
  if (raw === undefined || raw === '') return fallback
  const value = decimalInteger(raw)
  if (value === null || value < min || value > max) {
    throw new ConfigError(`${name}: must be an integer from ${min} to ${max}${orWord ? ` or ${orWord}` : ''}, got "${raw}"`)
  }
  return value
}

/**
 * Whether `value` can be an address to listen on: an IPv4 or IPv6 address, or a host name made of
 * RFC 1123 labels (`localhost`, `api.internal`). Checked with the other settings, before the store
 * is opened or created: a name that does not resolve still fails only at listen.
 */
export function isListenHost(value: string): boolean {
  if (isIP(value) !== 0) return true
  const label = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/
  // A fully qualified name may end with the root's dot (`api.example.com.`).
  const name = value.endsWith('.') ? value.slice(0, -1) : value
  return name.length <= 253 && name.split('.').every((part) => label.test(part))
}

function hostFrom(raw: string | undefined): string {
  if (raw === undefined || raw === '') return '127.0.0.1'
  if (!isListenHost(raw)) throw new ConfigError(`HOST: must be an IP address or a host name (letters, digits, hyphens and dots), got "${raw}"`)
  return raw
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const config: Config = {
    host: hostFrom(env.HOST),
    port: intFrom('PORT', env.PORT, 8080, 0, 65535),
    databaseUrl: postgresUrlFrom('DATABASE_URL', env.DATABASE_URL),
    dataDir: env.KBIS_DATA_DIR || './data',
    optimizeForSize: env.KBIS_OPTIMIZE_FOR_SIZE === undefined || env.KBIS_OPTIMIZE_FOR_SIZE === '' ? undefined : booleanFrom('KBIS_OPTIMIZE_FOR_SIZE', env.KBIS_OPTIMIZE_FOR_SIZE),
    heapGrowthPercent: env.KBIS_HEAP_GROWTH_PERCENT === undefined || env.KBIS_HEAP_GROWTH_PERCENT === '' ? undefined : intFrom('KBIS_HEAP_GROWTH_PERCENT', env.KBIS_HEAP_GROWTH_PERCENT, 0, 0, 300),
    pgliteSharedBuffersMb: intFrom('KBIS_PGLITE_SHARED_BUFFERS_MB', env.KBIS_PGLITE_SHARED_BUFFERS_MB, DEFAULT_PGLITE_SHARED_BUFFERS_MB, 16, 1024),
    redisUrl: redisUrlFrom(env.REDIS_URL),
    trustedProxies: trustedProxiesFrom(env.KBIS_TRUSTED_PROXIES),
    bodyLimit: intFrom('KBIS_BODY_LIMIT', env.KBIS_BODY_LIMIT, 1024 * 1024, 1024, 1024 ** 3),
    // 10,000 realistic items (8 properties, a client_ref, an embedded relationship) are ~4 MB
    // compact and ~6.5 MB pretty-printed: 8 MiB (~840 bytes an item) leaves room, not more.
    bulkBodyLimit: intFrom('KBIS_BULK_BODY_LIMIT', env.KBIS_BULK_BODY_LIMIT, 8 * 1024 * 1024, 1024, 1024 ** 3),
    logLevel: logLevelFrom(env.LOG_LEVEL),
    poolSize: intFrom('KBIS_POOL_SIZE', env.KBIS_POOL_SIZE, 10, 1, 1000),
    databaseReadUrl: postgresUrlFrom('DATABASE_READ_URL', env.DATABASE_READ_URL),
    readAfterWriteMs: intFrom('KBIS_READ_AFTER_WRITE_MS', env.KBIS_READ_AFTER_WRITE_MS, 2000, 0, 3_600_000),
    shutdownTimeoutSeconds: intFrom('KBIS_SHUTDOWN_TIMEOUT', env.KBIS_SHUTDOWN_TIMEOUT, 30, 0, 3600),
    metricsPort: env.KBIS_METRICS_PORT ? intFrom('KBIS_METRICS_PORT', env.KBIS_METRICS_PORT, 0, 0, 65535) : undefined,
    connectTimeoutMs: intFrom('KBIS_CONNECT_TIMEOUT_MS', env.KBIS_CONNECT_TIMEOUT_MS, 10_000, 100, 600_000),
    statementTimeoutMs: intFrom('KBIS_STATEMENT_TIMEOUT_MS', env.KBIS_STATEMENT_TIMEOUT_MS, 10_000, 0, 3_600_000),
    pgParallelSetupCost: env.KBIS_PG_PARALLEL_SETUP_COST === 'server'
      ? undefined
      : intFrom('KBIS_PG_PARALLEL_SETUP_COST', env.KBIS_PG_PARALLEL_SETUP_COST, DEFAULT_PG_PARALLEL_SETUP_COST, 0, 1_000_000_000, '"server" (the server\'s own setting)'),
    orgConcurrency: intFrom('KBIS_ORG_CONCURRENCY', env.KBIS_ORG_CONCURRENCY, 0, 0, 10_000),
    countCacheSize: intFrom('KBIS_COUNT_CACHE_SIZE', env.KBIS_COUNT_CACHE_SIZE, 1000, 0, 1_000_000),
    consoleIdleMinutes: intFrom('KBIS_CONSOLE_IDLE_MINUTES', env.KBIS_CONSOLE_IDLE_MINUTES, 30, 1, 7 * 24 * 60),
    eventRetentionDays: intFrom('KBIS_EVENT_RETENTION_DAYS', env.KBIS_EVENT_RETENTION_DAYS, 90, 0, 36500),
    eventRelayIntervalMs: intFrom('KBIS_EVENT_RELAY_INTERVAL_MS', env.KBIS_EVENT_RELAY_INTERVAL_MS, 100, 5, 60_000),
    natsUrl: natsUrlFrom(env.NATS_URL),
    natsStream: natsStreamFrom(env.KBIS_NATS_STREAM),
    webhookRetrySchedule: scheduleFrom(env.KBIS_WEBHOOK_RETRY_SCHEDULE),
    webhookAllowPrivate: booleanFrom('KBIS_WEBHOOK_ALLOW_PRIVATE', env.KBIS_WEBHOOK_ALLOW_PRIVATE),
    webhookTimeoutMs: intFrom('KBIS_WEBHOOK_TIMEOUT_MS', env.KBIS_WEBHOOK_TIMEOUT_MS, 15_000, 100, 600_000),
    webhookPollMs: intFrom('KBIS_WEBHOOK_POLL_MS', env.KBIS_WEBHOOK_POLL_MS, 1000, 10, 60_000),
    webhookConcurrency: intFrom('KBIS_WEBHOOK_CONCURRENCY', env.KBIS_WEBHOOK_CONCURRENCY, 128, 1, 10_000),
    publicUrl: publicUrlFrom(env.KBIS_PUBLIC_URL),
    corsOrigins: corsOriginsFrom(env.KBIS_CORS_ORIGINS),
    ...overrides,
  }
  // Refused with the other settings, before any store is opened or a data directory created.
  if (config.metricsPort !== undefined && config.metricsPort !== 0 && config.metricsPort === config.port) {
    throw new ConfigError(`KBIS_METRICS_PORT (or --metrics-port): ${config.port} is the API's port (PORT or --port); metrics need a port of their own`)
  }
  if (env.DATABASE_READ_URL && config.databaseReadUrl !== undefined && config.databaseUrl === undefined) {
    throw new ConfigError('DATABASE_READ_URL: names a replica of the PostgreSQL primary; set DATABASE_URL too')
  }
  return config
}

/** `text` as a URL, or null when it is none. */
function urlOf(text: string): URL | null {
  try {
    return new URL(text)
  } catch {
    return null
  }
}

/** A comma-separated list, blanks and empty entries dropped. */
function listFrom(raw: string | undefined): string[] {
  return (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean)
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

function logLevelFrom(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'info'
  if (!LOG_LEVELS.includes(raw)) throw new ConfigError(`LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`)
  return raw
}

/** Addresses and CIDRs, or proxy-addr's names of ranges (loopback, linklocal, uniquelocal). */
function trustedProxiesFrom(raw: string | undefined): string[] {
  return listFrom(raw).map((entry) => {
    const valid = ['loopback', 'linklocal', 'uniquelocal'].includes(entry) || isAddressOrRange(entry)
    if (!valid) throw new ConfigError(`KBIS_TRUSTED_PROXIES: a comma-separated list of addresses or CIDRs (10.0.0.1, 10.0.0.0/8, 2001:db8::/32; IPv4 in dotted decimal), got "${entry}"`)
    return entry
  })
}

/** NATS servers, comma-separated: `nats://host:4222`, `tls://…`, `ws(s)://…` or `host[:port]`. */
function natsUrlFrom(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined
  const servers = listFrom(raw)
  // Blanks and empty entries are left out here, not handed to the client, which took " " or a
  // trailing comma for a server and failed every attempt to connect ("Invalid URL").
  if (servers.length === 0) throw new ConfigError(`NATS_URL: names no server; a comma-separated list of NATS servers such as nats://127.0.0.1:4222, got "${raw}"`)
  for (const server of servers) {
    const url = urlOf(server.includes('://') ? server : `nats://${server}`)
    if (url === null || url.hostname === '' || !['nats:', 'tls:', 'ws:', 'wss:'].includes(url.protocol)) {
      throw new ConfigError(`NATS_URL: a comma-separated list of NATS servers such as nats://127.0.0.1:4222, got "${server}"`)
    }
  }
  return servers.join(',')
}

/**
 * A JetStream stream name as the NATS server takes it: at most 255 characters, none of them
 * whitespace, `.`, `*`, `>`, `/`, `\` or a control character. The client refuses the others
 * only when it first uses the stream, each attempt logging a stack trace.
 */
function natsStreamFrom(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'KBIS_EVENTS'
  if (!/^[^\s.*>/\\\p{Cc}]{1,255}$/u.test(raw)) {
    throw new ConfigError(`KBIS_NATS_STREAM: must be a JetStream stream name of at most 255 characters, without whitespace, ".", "*", ">", "/" or "\\", got "${raw}"`)
  }
  return raw
}

/**
 * `redis://` or `rediss://`, with an optional database number as the path (`/0`). Anything else
 * was passed to ioredis, which crashed the start later (`/abc`: an uncaught ReplyError) or took
 * `garbage` for a host. Never echoed: it may hold a password.
 */
function redisUrlFrom(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined
  const url = urlOf(raw)
  const example = 'a Redis URL such as redis://:password@host:6379/0'
  if (url === null) throw new ConfigError(`REDIS_URL: must be ${example} (the value set is not a URL)`)
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new ConfigError(`REDIS_URL: must be ${example}, not a ${url.protocol}// URL`)
  if (!/^(\/[0-9]*)?$/.test(url.pathname)) throw new ConfigError(`REDIS_URL: must be ${example}: the path is a database number`)
  return raw
}

/** Browser origins (`https://ui.example.com`, `http://localhost:5173`), or `*` for any. */
function corsOriginsFrom(raw: string | undefined): string[] {
  return listFrom(raw).map((entry) => {
    const origin = entry.replace(/\/+$/, '')
    if (origin === '*') return origin
    const url = urlOf(origin)
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== origin) {
      throw new ConfigError(`KBIS_CORS_ORIGINS: a comma-separated list of origins such as https://ui.example.com or http://localhost:5173 (scheme, host and port only), or *, got "${entry}"`)
    }
    return origin
  })
}

export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000]

/** `5,300,1800`: whole seconds before each retry, in plain decimal digits (blanks around the commas allowed). Empty = no retry. */
function scheduleFrom(raw: string | undefined): number[] {
  if (raw === undefined) return DEFAULT_WEBHOOK_RETRY_SCHEDULE
  if (raw.trim() === '') return []
  return raw.split(',').map((part) => {
    const value = decimalInteger(part.trim())
    if (value === null || value > 7 * 86400) {
      throw new ConfigError(`KBIS_WEBHOOK_RETRY_SCHEDULE: a comma-separated list of seconds (0 to 604800), got "${raw}"`)
    }
    return value
  })
}

function booleanFrom(name: string, raw: string | undefined): boolean {
  if (raw === undefined || raw === '' || raw === 'false' || raw === '0') return false
  if (raw === 'true' || raw === '1') return true
  throw new ConfigError(`${name}: must be true or false (or 1 or 0), got "${raw}"`)
}

/**
 * A PostgreSQL connection string as node-postgres reads it: a `postgres://` or `postgresql://`
 * URL, `socket:/path?db=…`, or a Unix socket directory (`/run/postgresql db`). Anything else was
 * passed on and failed far from its cause (`not a url` → "getaddrinfo ENOTFOUND base"). The
 * value is never echoed: it may hold a password.
 */
/**
 * `raw` as a URL. libpq's URL for a Unix socket names the socket's directory in its `host`
 * parameter and may name credentials without a host (`postgres://kbis@/kbis?host=/var/run/postgresql`),
 * which is no WHATWG URL; pg reads it, so it is read here with a stand-in host.
 */
function postgresUrlOf(raw: string): URL | null {
  return urlOf(raw) ?? urlOf(raw.replace(/^(postgres(?:ql)?:\/\/[^/?#]*@)(?=[/?#]|$)/i, '$1localhost'))
}

function postgresUrlFrom(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined
  if (raw.startsWith('/')) return raw
  const url = postgresUrlOf(raw)
  const protocol = url?.protocol
  if (protocol === undefined) throw new ConfigError(`${name}: must be a PostgreSQL URL such as postgres://user:password@host:5432/database (the value set is not a URL)`)
  if (!['postgres:', 'postgresql:', 'socket:'].includes(protocol)) {
    throw new ConfigError(`${name}: must be a PostgreSQL URL such as postgres://user:password@host:5432/database, not a ${protocol}// URL`)
  }
  // pg reads an sslmode it does not know as "SSL on": a typo would look like a server without SSL.
  const sslmode = url?.searchParams.get('sslmode')
  if (sslmode != null && !SSL_MODES.includes(sslmode)) {
    throw new ConfigError(`${name}: sslmode must be one of ${SSL_MODES.join(', ')}, got "${sslmode}"`)
  }
  return raw
}

/** The `sslmode` values of a PostgreSQL URL that pg (pg-connection-string) knows. */
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify']

/** Where a PostgreSQL URL points, for messages: host, port and database, never the credentials. */
export function postgresTarget(raw: string): string {
  const url = raw.startsWith('/') ? null : postgresUrlOf(raw)
  if (url === null) return `the socket ${raw.split(' ')[0]}`
  if (url.protocol === 'socket:') return `the socket ${url.pathname}`
  // A `host` parameter stands for the URL's host (pg reads it so): a socket's directory, or a name.
  const host = url.searchParams.get('host')
  const database = url.pathname.length > 1 ? url.pathname : ''
  if (host?.startsWith('/')) return `the socket ${host}`
  return `${host || url.hostname || 'localhost'}:${url.port || '5432'}${database}`
}

function publicUrlFrom(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined
  const url = urlOf(raw)
  if (url === null) throw new ConfigError(`KBIS_PUBLIC_URL: must be an absolute http(s) URL such as https://inventory.example.com, got "${raw}"`)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`KBIS_PUBLIC_URL: must start with http:// or https://, got "${raw}"`)
  if (url.search || url.hash) throw new ConfigError(`KBIS_PUBLIC_URL: must not carry a query or fragment, got "${raw}"`)
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '')
}
