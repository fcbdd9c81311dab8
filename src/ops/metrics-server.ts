import { createServer, type Server } from 'node:http'
import { WorkerMetrics } from './cluster-metrics.js'
import { metrics } from './metrics.js'
import { requestIdOf } from './request-id.js'

/**
 * `--metrics-port`: Prometheus text at `/metrics`, on its own port so that it is never exposed with
 * the API. Under `--workers` the primary serves it and sums its workers' series (cluster-metrics.ts);
 * a lone server serves its own registry.
 */
export async function startMetricsServer(port: number, host: string, options: { cluster?: boolean; onError?: (err: unknown, requestId: string) => void } = {}): Promise<Server & { url: string }> {
  const workers = options.cluster ? new WorkerMetrics() : null
  const server = createServer((req, res) => {
    // The API's rule (CONTRACT §17): the caller's id when it is plain, echoed, and in every error.
    const requestId = requestIdOf(req)
    res.setHeader('x-request-id', requestId)
    const fail = (status: 404 | 500, code: string, detail: string) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
      res.end(JSON.stringify({ errors: [{ status: String(status), code, detail, meta: { request_id: requestId } }] }))
    }
    // HEAD as GET: Node sends a HEAD answer's headers only.
    if ((req.method !== 'GET' && req.method !== 'HEAD') || req.url?.split('?')[0] !== '/metrics') {
      fail(404, 'not_found', 'metrics are at GET /metrics')
      return
    }
    // prom-client's aggregation omits the workers' start times: the primary's says when the service started.
    const text = workers
      ? Promise.all([workers.collect(), metrics.registry.getSingleMetricAsString('process_start_time_seconds')]).then(([all, start]) => `${all}${start}\n`)
      : metrics.registry.metrics()
    text.then(
      (body) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType })
        res.end(body)
      },
      (err: unknown) => {
        options.onError?.(err, requestId)
        fail(500, 'internal_error', 'metrics could not be collected')
      },
    )
  })
  await new Promise<void>((resolve, reject) => {
    // Said the same way by a lone server and by the primary of --workers.
    server.once('error', (err) => reject(new Error(`cannot serve metrics on ${host}:${port} (KBIS_METRICS_PORT or --metrics-port): ${err.message}`)))
    server.listen(port, host, () => resolve())
  })
  const address = server.address()
  const bound = typeof address === 'object' && address ? address.port : port
  return Object.assign(server, { url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/metrics` })
}
