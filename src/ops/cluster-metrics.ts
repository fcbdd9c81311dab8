import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry } from 'prom-client'

/** prom-client's messages between a primary and its workers (the workers answer them: metrics.ts). */
const METRICS_REQUEST = 'prom-client:getMetricsReq'
const METRICS_RESPONSE = 'prom-client:getMetricsRes'

/** How long a scrape waits for the workers' answers. */
export const WORKER_ANSWER_MS = 2_000

/** A worker's answer: its registries' `getMetricsAsJSON()`, one array each. */
type Registries = object[]

interface WorkerAnswer {
  type?: unknown
  requestId?: unknown
  metrics?: Registries
  error?: unknown
}

/**
 * The primary's `/metrics` under `--workers`: the sums of its live workers' series, as prom-client's
 * `AggregatorRegistry.clusterMetrics()` makes them, but a scrape never fails for one worker. That
 * one waits for every connected worker and fails after 5 s when one does not answer: a worker
 * just forked, just killed, or busy lost Prometheus a scrape. Here the scrape waits
 * {@link WORKER_ANSWER_MS} at most, and a live worker that has not answered counts with the
 * series it gave last (counters keep rising: a worker missing from one scrape is not a reset to
 * Prometheus); a worker that exited counts no more (its replacement starts at zero, as documented).
 * The text then starts with a comment saying how many workers did not answer.
 */
export class WorkerMetrics {
  private readonly last = new Map<number, Registries>()
  private requests = 0

  async collect(): Promise<string> {
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)
    for (const id of this.last.keys()) if (!workers.some((w) => w.id === id)) this.last.delete(id)
    const answered = await this.ask(workers.filter((w) => w.isConnected()))
    for (const [id, metrics] of answered) this.last.set(id, metrics)
    const silent = workers.filter((w) => !answered.has(w.id))
    const text = await AggregatorRegistry.aggregate([...this.last.values()].flat()).metrics()
    if (silent.length === 0) return text
    const counted = silent.filter((w) => this.last.has(w.id)).length
    return `# kbis: ${silent.length} of ${workers.length} workers did not answer within ${WORKER_ANSWER_MS / 1000} s`
      + `${counted > 0 ? ` (${counted} counted with the series it gave last)` : ''}\n${text}`
  }

  /** The answers of `workers` that come within WORKER_ANSWER_MS, by worker id. */
  private ask(workers: Worker[]): Promise<Map<number, Registries>> {
    const requestId = `kbis-${++this.requests}`
    const answers = new Map<number, Registries>()
    const waiting = new Set(workers.map((w) => w.id))
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        cluster.off('message', onMessage)
        resolve(answers)
      }
      const onMessage = (worker: Worker, message: WorkerAnswer): void => {
        if (message?.type !== METRICS_RESPONSE || message.requestId !== requestId || !waiting.delete(worker.id)) return
        if (message.error === undefined && Array.isArray(message.metrics)) answers.set(worker.id, message.metrics)
        if (waiting.size === 0) done()
      }
      const timer = setTimeout(done, WORKER_ANSWER_MS)
      cluster.on('message', onMessage)
      for (const worker of workers) {
        // A worker that exits meanwhile: its channel refuses, and it is no longer waited for.
        worker.send({ type: METRICS_REQUEST, requestId }, (err: Error | null) => {
          if (err && waiting.delete(worker.id) && waiting.size === 0) done()
        })
      }
      if (waiting.size === 0) done()
    })
  }
}
