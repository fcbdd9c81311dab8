import http from 'node:http'
import { connect } from 'node:net'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'
import { metrics } from '../../src/ops/metrics.js'

/** CONTRACT §17, "one JSON line per request": also for an answer whose connection closed before it was complete. */
for (const kind of STORES) {
  describe(`${kind}: the request line of an answer cut short`, () => {
    let store: TestStore
    let app: FastifyInstance
    let key: string
    let port: number
    const lines: Record<string, unknown>[] = []

    beforeAll(async () => {
      store = await createTestStore(kind)
      await applySetup(store.db, ACME as unknown as SetupFile)
      key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'ops', type: 'Admin', roles: ['all'] })).secret
      const stream = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
      app = await buildApp({ db: store.db, config: loadConfig({}), logger: { level: 'info', stream } })
      await app.listen({ port: 0, host: '127.0.0.1' })
      port = (app.server.address() as AddressInfo).port
      // Enough servers that the export is still being written when the client leaves.
      for (let chunk = 0; chunk < 2; chunk++) {
        const body = Array.from({ length: 10_000 }, (_, i) => ({
          asset_type_key: 'server', name: `s-${chunk}-${i}`, properties: { hostname: `s-${chunk}-${i}`, owner: 'x'.repeat(200) },
        }))
        const res = await app.inject({ method: 'POST', url: '/api/v1/bulk/assets', headers: { authorization: `Bearer ${key}` }, payload: body })
        expect(res.statusCode).toBe(201)
      }
    }, 120_000)
    afterAll(async () => {
      await app.close()
      await store.drop()
    })

    it('writes the line of an export whose client went away after the first bytes (status 200, completed false)', async () => {
      await new Promise<void>((resolve, reject) => {
        const req = http.get({
          host: '127.0.0.1', port, path: '/api/v1/export/assets?format=ndjson',
          headers: { authorization: `Bearer ${key}`, 'x-request-id': 'export-cut-1' },
        }, (res) => {
          res.once('data', () => { req.destroy(); resolve() })
        })
        req.on('error', (err) => (err.message === 'socket hang up' ? resolve() : reject(err)))
      })
      const until = Date.now() + 10_000
      while (!lines.some((l) => l.request_id === 'export-cut-1') && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
      expect(lines.filter((l) => l.request_id === 'export-cut-1')).toEqual([expect.objectContaining({
        level: 40, method: 'GET', route: '/api/v1/export/assets', status_code: 200, completed: false,
        org_key: 'acme', msg: 'request ended before its answer was complete',
      })])
    })

    it('writes a line for each answer of the HTTP layer (431, a malformed request line, CONNECT) with the id the answer carries, and counts it', async () => {
      const count = async (status: string) => ((await metrics.httpDuration.get()).values
        .find((v) => v.metricName === 'http_request_duration_seconds_count' && v.labels.route === 'unmatched' && v.labels.status_code === status)?.value ?? 0)
      const before = { 431: await count('431'), 400: await count('400'), 405: await count('405') }
      const answers: { id: string; status: number; method: string }[] = []
      for (const [data, method] of [
        [`GET /api/v1/assets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 'unknown'],
        ['GARBAGE\r\n\r\n', 'unknown'],
        ['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 'CONNECT'],
      ] as const) {
        const socket = connect(port, '127.0.0.1')
        const chunks: Buffer[] = []
        socket.on('data', (chunk) => chunks.push(chunk))
        socket.write(data)
        await once(socket, 'close')
        const text = Buffer.concat(chunks).toString('utf8')
        answers.push({ id: /x-request-id: (\S+)/i.exec(text)![1]!, status: Number(text.split(' ')[1]), method })
      }
      expect(answers.map((a) => a.status)).toEqual([431, 400, 405])
      for (const { id, status, method } of answers) {
        expect(lines.filter((l) => l.request_id === id).map(({ level, msg, method, route, status_code, org_key }) => ({ level, msg, method, route, status_code, org_key }))).toEqual([
          { level: 30, msg: 'request answered by the HTTP layer', method, route: 'unmatched', status_code: status, org_key: null },
        ])
      }
      expect({ 431: await count('431') - before[431], 400: await count('400') - before[400], 405: await count('405') - before[405] }).toEqual({ 431: 1, 400: 1, 405: 1 })
    })

    it('writes a client that left in the middle of its body as such (400, completed false), not as a database out of reach', async () => {
      const layerLines = () => lines.filter((l) => l.msg === 'request answered by the HTTP layer').length
      const samples = async () => (await metrics.httpDuration.get()).values
        .filter((v) => v.metricName === 'http_request_duration_seconds_count').reduce((sum, v) => sum + v.value, 0)
      const [layerBefore, samplesBefore] = [layerLines(), await samples()]
      const socket = connect(port, '127.0.0.1')
      await once(socket, 'connect')
      socket.write(`POST /api/v1/search/assets HTTP/1.1\r\nHost: x\r\nX-Request-Id: body-cut-1\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"filter":')
      await new Promise((r) => setTimeout(r, 200))
      socket.destroy()
      const until = Date.now() + 10_000
      while (!lines.some((l) => l.request_id === 'body-cut-1' && 'status_code' in l) && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
      expect(lines.filter((l) => l.request_id === 'body-cut-1').map(({ level, msg, status_code, completed, route }) => ({ level, msg, status_code, completed, route }))).toEqual([
        { level: 40, msg: 'request ended before its answer was complete', status_code: 400, completed: false, route: '/api/v1/search/assets' },
      ])
      // One line and one sample: none of the HTTP layer's besides (the request was read).
      await new Promise((r) => setTimeout(r, 100))
      expect(layerLines()).toBe(layerBefore)
      expect(await samples()).toBe(samplesBefore + 1)
    })
  })
}
