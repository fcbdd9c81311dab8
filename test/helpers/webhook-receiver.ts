import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

export interface Received {
  headers: http.IncomingHttpHeaders
  body: string
  at: number
}

export interface Receiver {
  url: string
  port: number
  received: Received[]
  /** How the receiver answers the next requests (default 204). */
  respond: (req: Received, res: http.ServerResponse) => void
  /** Resolves once `n` requests arrived (rejects after `timeoutMs`). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>
  close(): Promise<void>
}

/** A local webhook receiver on 127.0.0.1 (port 0 unless given), recording every request. */
export async function startReceiver(port = 0): Promise<Receiver> {
  const waiters: { n: number; resolve: () => void }[] = []
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    respond: (_req, res) => { res.statusCode = 204; res.end() },
    async waitFor(n, timeoutMs = 10_000) {
      if (receiver.received.length < n) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`the receiver got ${receiver.received.length} of ${n} requests in ${timeoutMs} ms`)), timeoutMs)
          waiters.push({ n, resolve: () => { clearTimeout(timer); resolve() } })
        })
      }
      return receiver.received
    },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }),
  }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const entry = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() }
      receiver.received.push(entry)
      receiver.respond(entry, res)
      for (const w of waiters.splice(0)) {
        if (receiver.received.length >= w.n) w.resolve()
        else waiters.push(w)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()))
  receiver.port = (server.address() as AddressInfo).port
  receiver.url = `http://127.0.0.1:${receiver.port}/hook`
  return receiver
}

/** Verifies a received request as a receiver would, with the `standardwebhooks` package; returns the event. */
export function verify(secret: string, r: Received): any {
  return new Webhook(secret).verify(r.body, {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  })
}

/** Polls `fn` until it returns a truthy value (or throws after `timeoutMs`). */
export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, everyMs = 25): Promise<T> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const value = await fn()
    if (value) return value
    if (Date.now() > until) throw new Error(`condition not met within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}
