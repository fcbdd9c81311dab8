import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** What a raw socket received until the server closed it: status line, headers, JSON body. */
async function rawExchange(port: number, data: string): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
    socket.on('error', (err) => (chunks.length > 0 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(err)))
    socket.setTimeout(10_000, () => reject(new Error('no answer within 10 s')))
    socket.write(data)
  })
  const [head, ...rest] = text.split('\r\n\r\n')
  const [statusLine, ...headerLines] = head!.split('\r\n')
  const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) }
}

/** A request over a real connection, the body written in 1 MiB chunks while the server may answer early. */
async function sendLarge(port: number, path: string, key: string, bytes: number, chunked: boolean): Promise<{ status: number; headers: Record<string, unknown>; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1', port, path, method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': String(bytes) }) },
    }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }))
    })
    req.on('error', reject)
    const chunk = Buffer.alloc(1024 * 1024, 'a')
    chunk[0] = '['.charCodeAt(0)
    let sent = 0
    const pump = (): void => {
      while (sent < bytes) {
        const piece = sent + chunk.length <= bytes ? chunk : chunk.subarray(0, bytes - sent)
        sent += piece.length
        if (!req.write(piece)) return void req.once('drain', pump)
      }
      req.end()
    }
    pump()
  })
}

/**
 * Like a client that sends the whole body before it reads anything (curl, Python's requests): the
 * socket reads nothing until the last byte is written, so an answer followed by a close while the
 * body is still coming is lost to the reset that the unread body provokes.
 */
async function sendThenRead(port: number, path: string, key: string, bytes: number): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    socket.pause()
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
    socket.on('error', reject)
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${bytes}\r\n\r\n`)
    const chunk = Buffer.alloc(1024 * 1024, ' ')
    let sent = 0
    const pump = (): void => {
      while (sent < bytes) {
        const piece = sent + chunk.length <= bytes ? chunk : chunk.subarray(0, bytes - sent)
        sent += piece.length
        if (!socket.write(piece)) return void socket.once('drain', pump)
      }
      socket.resume()
    }
    pump()
  })
  const [head, ...rest] = text.split('\r\n\r\n')
  const [statusLine, ...headerLines] = head!.split('\r\n')
  const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) }
}

for (const store of STORES) {
  describe(`${store}: answers of the HTTP layer over real sockets`, () => {
    let t: TestApp
    let port: number
    beforeAll(async () => {
      t = await createTestApp(store)
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      port = (t.app.server.address() as { port: number }).port
    })
    afterAll(async () => t.close())

    const envelope = (res: { status: number; headers: Record<string, unknown>; body: any }, code: string) => {
      expect(res.body).toEqual({ errors: [{ status: String(res.status), code, detail: expect.any(String), meta: { request_id: res.headers['x-request-id'] } }] })
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    }

    it('delivers the 413 of a 50 MB body to a client still sending it (Content-Length and chunked)', async () => {
      for (const [path, limit] of [['/api/v1/bulk/assets', t.app.config.bulkBodyLimit], ['/api/v1/assets', t.app.config.bodyLimit]] as const) {
        for (const chunked of [false, true]) {
          const res = await sendLarge(port, path, t.adminKey, 50 * 1024 * 1024, chunked)
          expect(res.status, `${path} chunked=${chunked}`).toBe(413)
          envelope(res, 'payload_too_large')
          expect(res.body.errors[0].detail).toBe(`the body is larger than ${limit} bytes`)
        }
      }
      const patient = await sendThenRead(port, '/api/v1/bulk/assets', t.adminKey, 50 * 1024 * 1024)
      expect(patient.status).toBe(413)
      envelope(patient, 'payload_too_large')
      expect(patient.headers.connection).toBe('close')
      // The server is fine afterwards.
      const after = await fetch(`http://127.0.0.1:${port}/api/v1/assets?page[size]=1`, { headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(after.status).toBe(200)
    })

    it('answers headers over 16 KiB with 431 in the envelope', async () => {
      const res = await rawExchange(port, `GET /api/v1/assets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
      expect(res.status).toBe(431)
      envelope(res, 'headers_too_large')
      expect(res.headers.connection).toBe('close')
    })

    it('measures a header block of many short lines whole: 431 past 16 KiB, every line kept below it', async () => {
      const lines = (n: number) => Array.from({ length: n }, (_, i) => `x${i % 100}: y\r\n`).join('')
      // 3,000 lines of 8 bytes (24 KB): Node's parser lets it through and keeps only 2,000 lines.
      const many = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${lines(3_000)}\r\n`)
      expect(many.status).toBe(431)
      envelope(many, 'headers_too_large')
      expect(many.headers.connection).toBe('close')
      // 2,100 lines of 8 bytes under the limit: served, the Authorization after them still read.
      const under = await rawExchange(port, `GET /api/v1/assets?page[size]=1 HTTP/1.1\r\nHost: x\r\n${lines(1_900)}Authorization: Bearer ${t.adminKey}\r\nConnection: close\r\n\r\n`)
      expect(under.status).toBe(200)
      expect(under.body.meta.page.size).toBe(1)
    })

    it('refuses two Host headers or an invalid one (400), and a transfer coding other than chunked (501), in the envelope', async () => {
      for (const hosts of ['Host: a\r\nHost: b\r\n', 'Host: a b\r\n', 'Host: a/b\r\n', 'Host: a:8x\r\n', 'Host: a:99999\r\n', 'Host: a:123456\r\n']) {
        const res = await rawExchange(port, `GET /healthz HTTP/1.1\r\n${hosts}\r\n`)
        expect(res.status, hosts).toBe(400)
        envelope(res, 'invalid_request')
        expect(res.headers.connection).toBe('close')
        expect(res.headers['cache-control']).toBe('no-store')
        expect(res.body.errors[0].detail).toMatch(/^(a request must carry one Host header, not several|the Host header is not a valid host\[:port\])$/)
      }
      for (const host of ['', 'example.com:8080', '[::1]:80', '127.0.0.1', 'xn--bcher-kva.example', 'a:65535', 'a:']) {
        expect((await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)).status, host).toBe(200)
      }
      const body = '{"asset_type_key":"server","name":"gz","properties":{"hostname":"gz"}}'
      const chunk = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`
      const gz = await rawExchange(port, `POST /api/v1/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${chunk}`)
      expect(gz.status).toBe(501)
      envelope(gz, 'not_implemented')
      expect(gz.headers['cache-control']).toBe('no-store')
      expect(gz.headers.connection).toBe('close')
      expect((await t.request('GET', '/api/v1/assets/server:hostname:gz')).status).toBe(404)
      const plain = await rawExchange(port, `POST /api/v1/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk}`)
      expect(plain.status).toBe(201)
    })

    it('tells caches not to keep API answers, and answers HEAD with the headers GET has (compressed)', async () => {
      const auth = { authorization: `Bearer ${t.adminKey}` }
      for (const path of ['/api/v1/assets?page[size]=1', '/api/v1/nope', '/healthz']) {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: auth })
        expect(res.headers.get('cache-control'), path).toBe('no-store')
      }
      expect((await rawExchange(port, 'GARBAGE\r\n\r\n')).headers['cache-control']).toBe('no-store')
      const head = (method: string) => new Promise<Record<string, unknown>>((resolve, reject) => {
        const r = httpRequest({ host: '127.0.0.1', port, method, path: '/api/v1/openapi/base.json', headers: { 'accept-encoding': 'gzip' } }, (res) => {
          res.resume()
          res.on('end', () => resolve(res.headers))
        })
        r.on('error', reject)
        r.end()
      })
      const [get, headers] = [await head('GET'), await head('HEAD')]
      expect(get['content-encoding']).toBe('gzip')
      expect(headers['content-encoding']).toBe('gzip')
      expect(headers.vary).toBe(get.vary)
      expect(headers['content-length']).toBe(get['content-length'])
      expect(headers['content-type']).toBe(get['content-type'])
    })

    it('answers headers that do not arrive within the header timeout with 408 about when it passes, and serves none completed later', async () => {
      // The server's 60 s, shortened for the test (Node reads it at each check): the checks run every second.
      t.app.server.headersTimeout = 1_500
      try {
        const socket = connect(port, '127.0.0.1')
        await once(socket, 'connect')
        const chunks: Buffer[] = []
        socket.on('data', (chunk) => chunks.push(chunk))
        const closed = once(socket, 'close')
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a')
        await new Promise((resolve) => setTimeout(resolve, 4_500))
        // By now the 408 has been sent and the connection closed: these bytes find no one.
        if (!socket.destroyed) socket.write('\r\n\r\n')
        await closed
        const text = Buffer.concat(chunks).toString('utf8')
        expect(text).toMatch(/^HTTP\/1\.1 408 /)
        expect(text).toContain('"code":"request_timeout"')
        expect(text).not.toContain('"status":"ok"')
      } finally {
        t.app.server.headersTimeout = 60_000
      }
    })

    it('answers a malformed request line with 400 invalid_request in the envelope', async () => {
      for (const line of ['GARBAGE\r\n\r\n', 'GET /api/v1/assets HTTP/9.9\r\nHost: x\r\n\r\n', 'G@T / HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n']) {
        const res = await rawExchange(port, line)
        expect(res.status, JSON.stringify(line)).toBe(400)
        envelope(res, 'invalid_request')
        expect(res.body.errors[0].detail).toMatch(/^the request (line )?is (malformed|not valid HTTP\/1\.1)/)
      }
      // Says what to do about a target Node's parser refuses: raw UTF-8, in the query or in the path.
      for (const target of ['/api/v1/assets?filter[name]=\u00fc', '/api/v1/assets/\u00fc']) {
        const raw = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`)
        expect(raw.status, target).toBe(400)
        expect(raw.body.errors[0].detail, target).toBe('the request line is malformed: the request target is not a valid URL (percent-encode spaces, control characters and bytes outside ASCII)')
      }
    })

    it('refuses the HTTP versions Node reads but HTTP/1.1 does not (2.0, 0.9), and an HTTP/1.1 request without Host, in the envelope', async () => {
      for (const version of ['2.0', '0.9']) {
        const res = await rawExchange(port, `GET /healthz HTTP/${version}\r\nHost: x\r\n\r\n`)
        expect(res.status, version).toBe(400)
        envelope(res, 'invalid_request')
        expect(res.body.errors[0].detail).toBe('the request line is malformed: the HTTP version must be HTTP/1.0 or HTTP/1.1')
      }
      const hostless = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n')
      expect(hostless.status).toBe(400)
      envelope(hostless, 'invalid_request')
      expect(hostless.body.errors[0].detail).toBe('an HTTP/1.1 request must carry a Host header')
      // HTTP/1.0 has no Host to require.
      expect((await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n')).status).toBe(200)
    })

    /** Writes `data` on one connection and reads until the server closes it (or `ms` pass): the answers' status lines. */
    const pipeline = async (data: string, ms = 10_000): Promise<{ statuses: number[]; text: string }> => {
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1')
        const chunks: Buffer[] = []
        socket.on('data', (chunk) => chunks.push(chunk))
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
        socket.on('error', reject)
        socket.setTimeout(ms, () => socket.destroy())
        socket.write(data)
      })
      return { statuses: [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), text }
    }
    const req = (method: string, path: string, body?: object, extra = '') => {
      const json = body === undefined ? '' : JSON.stringify(body)
      return `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\n${extra}`
        + (body === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`)
    }

    it('answers a request before the malformed bytes that follow it on its connection, in order (a DELETE whose body came unannounced)', async () => {
      const created = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'pipelined', properties: { hostname: 'pipelined' } } })
      expect(created.status).toBe(201)
      // Node's own http.request sends a DELETE's body without Content-Length: the server reads a
      // DELETE without a body, then `null` as the start of a request that is not HTTP.
      const { text } = await pipeline(`${req('DELETE', `/api/v1/assets/${created.body.data.id}`)}null`)
      expect(text).toMatch(/^HTTP\/1\.1 204 No Content\r\n/)
      const second = text.indexOf('HTTP/1.1 400 Bad Request\r\n')
      expect(second).toBeGreaterThan(0)
      expect(text.slice(second)).toContain('"code":"invalid_request"')
      expect((await t.request('GET', `/api/v1/assets/${created.body.data.id}`)).status).toBe(404)
    })

    it('runs pipelined requests one after the other, in order, and none behind an answer that closes the connection', async () => {
      // Writes to one asset pipelined: each sees the one before it.
      const key = 'server:hostname:piped-1'
      const ordered = await pipeline(req('POST', '/api/v1/assets', { asset_type_key: 'server', name: 'piped-1', properties: { hostname: 'piped-1' } })
        + req('PATCH', `/api/v1/assets/${key}`, { name: 'piped-1b' }) + req('DELETE', `/api/v1/assets/${key}`)
        + req('GET', `/api/v1/assets/${key}`, undefined, 'Connection: close\r\n'))
      expect(ordered.statuses).toEqual([201, 200, 204, 404])
      // A malformed body's 400 closes the connection: the write behind it is neither run nor answered.
      const cut = await pipeline(req('GET', '/api/v1/assets?page[size]=1')
        + `POST /api/v1/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{"a`
        + req('POST', '/api/v1/assets', { asset_type_key: 'server', name: 'ghost', properties: { hostname: 'ghost' } }))
      expect(cut.statuses).toEqual([200, 400])
      expect((await t.request('GET', '/api/v1/assets/server:hostname:ghost')).status).toBe(404)
      // Bytes after a request that asked to close: no answer of the HTTP layer for them.
      const closing = await pipeline('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
      expect(closing.statuses).toEqual([200, 200])
    })

    it('dates the answers of the HTTP layer', async () => {
      const text = (await pipeline('GARBAGE\r\n\r\n')).text
      expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
      const date = /\r\nDate: ([^\r]+)\r\n/.exec(text)?.[1]
      expect(Math.abs(Date.parse(date!) - Date.now())).toBeLessThan(10_000)
    })

    it('serves a request whose Expect header asks for something other than 100-continue, as if it had none', async () => {
      for (const expectation of ['bogus', 'x-custom=1']) {
        const res = await rawExchange(port, `GET /api/v1/assets?page[size]=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\nExpect: ${expectation}\r\nConnection: close\r\n\r\n`)
        expect(res.status, expectation).toBe(200)
        expect(res.body.meta.page.size).toBe(1)
      }
      const unauthenticated = await rawExchange(port, 'GET /api/v1/assets HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nConnection: close\r\n\r\n')
      expect(unauthenticated.status).toBe(401)
      envelope(unauthenticated, 'unauthorized')
    })

    it('asks for a body (100 Continue) only when the request passed its checks and its announced length fits', async () => {
      /** Sends the head of a POST with Expect: 100-continue and reads what comes before any body is sent. */
      const head = (key: string | null, length: number) => new Promise<{ text: string; socket: ReturnType<typeof connect> }>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1')
        let text = ''
        socket.on('data', (d: Buffer) => {
          text += d.toString('utf8')
          if (text.includes('\r\n\r\n') && (!text.startsWith('HTTP/1.1 100') || text.indexOf('\r\n\r\n') < text.length - 4 || text.startsWith('HTTP/1.1 100 Continue\r\n\r\n'))) resolve({ text, socket })
        })
        socket.on('error', reject)
        socket.write(`POST /api/v1/assets HTTP/1.1\r\nHost: x\r\n${key ? `Authorization: Bearer ${key}\r\n` : ''}Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`)
      })
      const started = Date.now()
      const tooLarge = await head(t.adminKey, 2_000_000)
      expect(tooLarge.text).toMatch(/^HTTP\/1\.1 413 /)
      expect(tooLarge.text.toLowerCase()).toContain('connection: close')
      tooLarge.socket.destroy()
      const noKey = await head(null, 10)
      expect(noKey.text).toMatch(/^HTTP\/1\.1 401 /)
      noKey.socket.destroy()
      expect(Date.now() - started).toBeLessThan(10_000)
      // A body that fits, with a key: 100 Continue, then the body, then its answer.
      const body = JSON.stringify({ asset_type_key: 'note', name: 'continued' })
      const fits = await head(t.adminKey, Buffer.byteLength(body))
      expect(fits.text).toBe('HTTP/1.1 100 Continue\r\n\r\n')
      const answer = await new Promise<string>((resolve) => {
        let text = ''
        fits.socket.on('data', (d: Buffer) => {
          text += d.toString('utf8')
          if (/\r\n\r\n\{.*\}$/s.test(text)) resolve(text)
        })
        fits.socket.write(body)
      })
      fits.socket.destroy()
      expect(answer).toMatch(/^HTTP\/1\.1 201 /)
    })

    it('answers CONNECT with 405 in the envelope', async () => {
      const res = await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')
      expect(res.status).toBe(405)
      envelope(res, 'method_not_allowed')
      expect(res.body.errors[0].detail).toBe('CONNECT is not supported: this is an API server, not a proxy')
    })
  })
}
