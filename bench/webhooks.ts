/**
 * Webhooks (CONTRACT §14, issue 11): commit → webhook arrival latency at an idle local receiver
 * (p50/p99 over single asset creates, from sending the request to the receiver reading the
 * delivery, so it includes the request itself), and 10,000 events (one bulk create) delivered to a
 * local receiver: time from the bulk's answer to the last arrival, deliveries/s (goal ≥ 1,000/s),
 * beside a bare Node.js client POSTing the same number of bodies to the same receiver (the
 * machine's ceiling). The service runs with KBIS_WEBHOOK_ALLOW_PRIVATE (bench/serve.ts): the
 * receiver is on 127.0.0.1. BENCH_WEBHOOK_ITEMS and BENCH_WEBHOOK_SAMPLES set smaller sizes.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { apiFor, type BenchContext, type Row } from './lib/context.js'
import { expectStatus } from './lib/http.js'
import { serverBatch, serverItem } from './lib/data.js'

const ITEMS = Number(process.env.BENCH_WEBHOOK_ITEMS || 10_000)
const SAMPLES = Number(process.env.BENCH_WEBHOOK_SAMPLES || 50)

interface Receiver {
  url: string
  /** Arrival time (ms) by asset id. */
  arrivals: Map<string, number>
  onArrival: (() => void) | null
  close(): Promise<void>
}

async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = { url: '', arrivals: new Map(), onArrival: null, close: async () => undefined }
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => { body += c })
    req.on('end', () => {
      const subject = (JSON.parse(body) as { subject?: string }).subject ?? ''
      if (subject.startsWith('assets/')) receiver.arrivals.set(subject.slice(7), performance.now())
      res.writeHead(204).end()
      receiver.onArrival?.()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  receiver.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  return receiver
}

function until(receiver: Receiver, done: () => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    if (done()) return resolve()
    const timer = setTimeout(() => { receiver.onArrival = null; reject(new Error(`bench webhooks: no delivery after ${timeoutMs} ms`)) }, timeoutMs)
    receiver.onArrival = () => {
      if (!done()) return
      clearTimeout(timer)
      receiver.onArrival = null
      resolve()
    }
  })
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

/** The ceiling: a bare keep-alive client, 64 in flight, POSTing `n` event-sized bodies. */
async function bareDeliveries(url: string, n: number, body: string): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const started = performance.now()
  let sent = 0
  const worker = async () => {
    while (sent < n) {
      sent++
      await new Promise<void>((resolve) => {
        const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
          res.resume()
          res.on('end', resolve)
        })
        req.on('error', () => resolve())
        req.end(body)
      })
    }
  }
  await Promise.all(Array.from({ length: 64 }, worker))
  agent.destroy()
  return n / ((performance.now() - started) / 1000)
}

export async function run(ctx: BenchContext): Promise<Row[]> {
  const client = apiFor(ctx, 'bench')
  const receiver = await startReceiver()
  try {
    const hook = await client.send('POST', '/api/v1/webhooks', JSON.stringify({ url: receiver.url, event_types: ['asset.created'] }))
    expectStatus(hook, 201, 'POST /api/v1/webhooks')

    // Latency: one asset at a time, the receiver otherwise idle.
    const latencies: number[] = []
    for (let i = 0; i < SAMPLES; i++) {
      const { client_ref: _, ...item } = serverItem(`wh-lat-${Date.now()}`, i)
      const sent = performance.now()
      const res = await client.send('POST', '/api/v1/assets', JSON.stringify(item))
      expectStatus(res, 201, 'POST /api/v1/assets')
      const id = (JSON.parse(res.text) as { data: { id: string } }).data.id
      await until(receiver, () => receiver.arrivals.has(id), 30_000)
      latencies.push(receiver.arrivals.get(id)! - sent)
    }
    ctx.log(`  webhook latency (ms) p50 ${percentile(latencies, 50).toFixed(1)} p99 ${percentile(latencies, 99).toFixed(1)} over ${SAMPLES}`)

    // Throughput: one bulk of ITEMS creates, ITEMS deliveries.
    receiver.arrivals.clear()
    const bulk = await client.send('POST', '/api/v1/bulk/assets', JSON.stringify(serverBatch(`wh-bulk-${Date.now()}`, ITEMS)))
    expectStatus(bulk, 201, 'POST /api/v1/bulk/assets')
    const committed = performance.now()
    await until(receiver, () => receiver.arrivals.size >= ITEMS, 600_000)
    const ms = Math.max(...receiver.arrivals.values()) - committed
    const perSecond = ITEMS / (ms / 1000)
    const sample = JSON.stringify({ specversion: '1.0', id: '0', type: 'asset.created', subject: 'bench/x', data: { object: serverItem('wh-raw', 0) } })
    const bare = await bareDeliveries(receiver.url.replace('/hook', '/bare'), ITEMS, sample)
    ctx.log(`  ${ITEMS} deliveries in ${ms.toFixed(0)} ms (${perSecond.toFixed(0)}/s); bare client ${bare.toFixed(0)}/s`)
    return [
      {
        metric: 'commit → webhook arrival latency p50 (idle local receiver)', ours: percentile(latencies, 50), raw: null, unit: 'ms',
        note: `${SAMPLES} single asset creates, each timed from sending POST /assets to the receiver reading its asset.created delivery.`,
      },
      { metric: 'commit → webhook arrival latency p99 (idle local receiver)', ours: percentile(latencies, 99), raw: null, unit: 'ms' },
      {
        metric: `${ITEMS.toLocaleString('en')} events delivered to a local receiver`, ours: perSecond, raw: bare, unit: 'events/s',
        target: { on: 'ours', op: '>=', value: 1000 },
        note: `One bulk create of ${ITEMS.toLocaleString('en')} servers → as many signed deliveries, ${(ms / 1000).toFixed(1)} s from the bulk's answer to the last arrival; raw = a bare keep-alive Node.js client (64 in flight) POSTing as many bodies to the same receiver.`,
      },
    ]
  } finally {
    await receiver.close()
  }
}
