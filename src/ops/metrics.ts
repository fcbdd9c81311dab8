import cluster from 'node:cluster'
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, register } from 'prom-client'
import { KBIS_VERSION } from '../core/version.js'

/**
 * The Prometheus series of CONTRACT §17, in prom-client's global registry (under
 * `kbis serve --workers`, the primary aggregates the workers' global registries). Features update
 * them through this one object, e.g. `metrics.watchPool(…)` or
 * `metrics.webhookDeliveries.inc({ outcome: 'delivered' })`; the known series of a labelled counter
 * are there at 0 from the start.
 */
function create() {
  collectDefaultMetrics()
  // A worker of `--workers` answers its primary's requests for its series; prom-client installs
  // that listener when an AggregatorRegistry is made.
  if (cluster.isWorker) new AggregatorRegistry()
  const poolSources = new Set<() => { total: number; idle: number; waiting: number }>()
  /** Each relay's count of pending events, and the last one it gave. */
  const pendingSources = new Map<() => Promise<number>, number>()
  const webhookDeliveries = new Counter({
    name: 'kbis_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome',
    labelNames: ['outcome'] as const,
  })
  const resultCache = new Counter({
    name: 'kbis_result_cache_reads_total',
    help: 'Remembered results asked for (filtered counts, analytics answers), by kind and outcome: hit, miss, or fresh (Cache-Control: no-cache)',
    labelNames: ['kind', 'outcome'] as const,
  })
  // Every series a counter has is there, at 0, before its first increment: rate() over it is 0
  // rather than nothing, and an alert on it works from the start.
  for (const outcome of ['delivered', 'retrying', 'failed']) webhookDeliveries.inc({ outcome }, 0)
  for (const kind of ['count', 'analytics']) for (const outcome of ['hit', 'miss', 'fresh']) resultCache.inc({ kind, outcome }, 0)
  // Which build runs, as labels of a series of value 1 (Prometheus's `*_build_info` convention:
  // joined onto other series, it tells which version answered). Under --workers every process has
  // it: the primary shows 1, not the number of workers.
  new Gauge({ name: 'kbis_build_info', help: 'The running kbis: its version and the Node.js version it runs on (value 1)', labelNames: ['version', 'nodejs'] as const, aggregator: 'max' })
    .set({ version: KBIS_VERSION, nodejs: process.versions.node }, 1)
  return {
    registry: register,
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration in seconds, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
    dbPoolConnections: new Gauge({
      name: 'kbis_db_pool_connections',
      help: 'PostgreSQL pool connections of this process, by state (total, idle, waiting clients)',
      labelNames: ['state'] as const,
      collect() {
        const sum = { total: 0, idle: 0, waiting: 0 }
        for (const source of poolSources) {
          const s = source()
          sum.total += s.total
          sum.idle += s.idle
          sum.waiting += s.waiting
        }
        for (const [state, value] of Object.entries(sum)) this.set({ state }, value)
      },
    }),
    eventsPending: new Gauge({
      name: 'kbis_events_pending',
      help: 'Events written but not yet stamped (PGlite: handed over) or published, in the whole store',
      // Counted when the metrics are read. Every worker of --workers counts the same store: the
      // primary shows that count, not the sum of the workers' equal figures.
      aggregator: 'max',
      async collect() {
        if (pendingSources.size === 0) return
        let sum = 0
        for (const [source, last] of pendingSources) {
          // A store that does not answer keeps its last count.
          const count = await source().catch(() => last)
          pendingSources.set(source, count)
          sum += count
        }
        this.set(sum)
      },
    }),
    webhookDeliveries,
    rateLimited: new Counter({ name: 'kbis_rate_limited_total', help: 'Requests refused with 429 rate_limit_exceeded' }),
    resultCache,
    storeUpkeep: new Histogram({
      name: 'kbis_store_upkeep_seconds',
      help: 'Statements of the upkeep the server runs itself after large writes (ANALYZE; on PGlite VACUUM too, one table each, each holding the store while it runs), by kind',
      labelNames: ['kind'] as const,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
    /** Adds a pool whose connections the gauge reports; returns the function that removes it. */
    watchPool(source: () => { total: number; idle: number; waiting: number }): () => void {
      poolSources.add(source)
      return () => poolSources.delete(source)
    },
    /** Adds an event relay whose pending events the gauge counts when read; returns the function that removes it. */
    watchEventsPending(source: () => Promise<number>): () => void {
      pendingSources.set(source, 0)
      return () => pendingSources.delete(source)
    },
  }
}

const KEY = Symbol.for('kbis.metrics')
type Metrics = ReturnType<typeof create>
// One set per process even if this module is loaded twice (tests load src/ and a CLI may load dist/).
const holder = globalThis as { [KEY]?: Metrics }
export const metrics: Metrics = holder[KEY] ?? (holder[KEY] = create())
