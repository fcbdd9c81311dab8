import autocannon from 'autocannon'
import { LOAD } from './config.js'

export interface Load {
  rps: number
  p99: number
  /** The slowest request of the window, ms. */
  max: number
}

export interface LoadRequest {
  method: 'GET' | 'POST'
  /** Cycled through, one per request. */
  paths: readonly string[]
  body?: string
  headers?: Record<string, string>
}

/** One autocannon window (LOAD.connections) against 127.0.0.1 only; throws on any non-2xx or error. */
export async function loadWindow(url: string, request: LoadRequest, seconds: number = LOAD.seconds): Promise<Load> {
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) throw new Error(`bench: load is aimed only at 127.0.0.1, not ${url}`)
  let next = 0
  const result = await autocannon({
    url,
    connections: LOAD.connections,
    duration: seconds,
    // A request that waits its turn behind a slow store is slow, not failed: autocannon's own 10 s
    // made the raw OFFSET of PGlite at 1,000,000 assets (10 connections queued on one thread) an error.
    timeout: 60,
    headers: { ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}), ...request.headers },
    requests: [{ method: request.method, ...(request.body !== undefined ? { body: request.body } : {}), setupRequest: (req: any) => ({ ...req, path: request.paths[next++ % request.paths.length] }) }],
  })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`bench: ${url}${request.paths[0]} answered ${result.non2xx} non-2xx and ${result.errors} errors under load`)
  // autocannon stops at the deadline with requests still in flight; a single-connection store
  // (PGlite) is still working through them. One more request waits behind them, so that the next
  // window starts on an idle server.
  await fetch(`${url}${request.paths[0]}`, { method: request.method, headers: { ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}), ...request.headers }, ...(request.body !== undefined ? { body: request.body } : {}) }).then((r) => r.arrayBuffer())
  return { rps: result.requests.average, p99: result.latency.p99, max: result.latency.max }
}

export const meanLoad = (loads: readonly Load[]): Load => ({
  rps: loads.reduce((a, l) => a + l.rps, 0) / loads.length,
  p99: loads.reduce((a, l) => a + l.p99, 0) / loads.length,
  max: Math.max(...loads.map((l) => l.max)),
})

/**
 * Ours and the limit, each warmed up, then taking turns for `rounds` windows each (a change in the
 * machine's load weighs on both alike); the mean of each one's windows.
 */
export async function loadPair(ours: { url: string; request: LoadRequest }, limit: { url: string; request: LoadRequest }, rounds = 2): Promise<{ ours: Load; limit: Load }> {
  await loadWindow(ours.url, ours.request, LOAD.warmupSeconds)
  await loadWindow(limit.url, limit.request, LOAD.warmupSeconds)
  const windows = { ours: [] as Load[], limit: [] as Load[] }
  for (let r = 0; r < rounds; r++) {
    windows.ours.push(await loadWindow(ours.url, ours.request))
    windows.limit.push(await loadWindow(limit.url, limit.request))
  }
  return { ours: meanLoad(windows.ours), limit: meanLoad(windows.limit) }
}
