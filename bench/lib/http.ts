import http from 'node:http'
import { createGunzip } from 'node:zlib'
import { performance } from 'node:perf_hooks'
/** A minimal client for the service under test (global fetch keeps connections alive). */
export interface Api {
  url: string
  /** Sends `body` as is (a prepared JSON text, so that building it is not timed) and reads the whole answer. */
  send(method: string, path: string, body?: string, headers?: Record<string, string>): Promise<{ status: number; text: string }>
}

export function api(url: string, secret: string): Api {
  const send: Api['send'] = async (method, path, body, headers = {}) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body } : {}),
    })
    return { status: res.status, text: await res.text() }
  }
  return { url, send }
}

/** Asks the service to compute a count or an aggregate afresh instead of answering the one it remembers. */
export const FRESH = { 'cache-control': 'no-cache' }

/** Throws with the answer's start when a setup request of the bench fails. */
export function expectStatus(res: { status: number; text?: string; body?: unknown }, status: number, what: string): void {
  if (res.status !== status) {
    const text = res.text ?? JSON.stringify(res.body)
    throw new Error(`bench: ${what} answered ${res.status} (expected ${status}): ${text.slice(0, 500)}`)
  }
}

/** Sends a prepared body; the clock covers sending, the service's work and reading the answer. */
export async function timedBulk(client: Api, method: string, url: string, body: string, status: number): Promise<{ ms: number; ids: string[] }> {
  const start = performance.now()
  const result = await client.send(method, url, body)
  const ms = performance.now() - start
  expectStatus(result, status, `${method} ${url}`)
  return { ms, ids: (JSON.parse(result.text) as { data: { id: string }[] }).data.map((d) => d.id) }
}

/**
 * GET /export/assets of every server as a client would read it, counting its lines (indexOf is
 * memchr: a byte loop here took a third of the time). node:http, not fetch: fetch asks for gzip
 * unasked and reads through web streams; with it the same uncompressed export measured 95–113k
 * rows/s against 149–174k by node:http (the client, not the service, was the limit).
 */
export function exportLines(url: string, secret: string, encoding: 'identity' | 'gzip', expected: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const req = http.get(`${url}/api/v1/export/assets?format=ndjson&filter[asset_type_key]=server`, { headers: { authorization: `Bearer ${secret}`, 'accept-encoding': encoding } }, (response) => {
      const body = encoding === 'gzip' ? response.pipe(createGunzip()) : response
      let lines = 0
      body.on('data', (chunk: Buffer) => { for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++ })
      body.on('end', () => {
        if (response.statusCode !== 200 || lines !== expected || (response.headers['content-encoding'] ?? 'identity') !== encoding) {
          reject(new Error(`bench: export answered ${response.statusCode} (${response.headers['content-encoding'] ?? 'identity'}) with ${lines} lines, expected ${expected} (${encoding})`))
        } else resolve()
      })
      body.on('error', reject)
    })
    req.on('error', reject)
  })
}
