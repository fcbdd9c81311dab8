import { readFileSync } from 'node:fs'
import { Writable } from 'node:stream'
import { Gauge } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { metrics } from '../../src/ops/metrics.js'
import { startMetricsServer } from '../../src/ops/metrics-server.js'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { ACME } from '../helpers/fixtures.js'
import type { TestApp } from '../helpers/app.js'
import { Browser, givenPasswords } from '../helpers/console.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
// A quota that the suite spends on purpose (a day-long window: it cannot reset mid-test).
const SETUP = { ...ACME, organization: { ...ACME.organization, rate_limit: { requests: 9, window_seconds: 86400 } } }

for (const kind of STORES) {
  describe(`${kind}: request ids, the request log, metrics, draining`, () => {
    let store: TestStore
    let app: FastifyInstance
    let key: string
    let keyId: string
    const lines: Record<string, unknown>[] = []

    beforeAll(async () => {
      store = await createTestStore(kind)
      await applySetup(store.db, SETUP as unknown as SetupFile)
      const created = await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'ops', type: 'Admin', roles: ['all'] })
      key = created.secret
      keyId = created.id
      const stream = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
      app = await buildApp({ db: store.db, config: loadConfig({}), logger: { level: 'info', stream } })
      await app.ready()
    })
    afterAll(async () => {
      await app.close()
      await store.drop()
    })

    const get = (url: string, headers: Record<string, string> = {}) =>
      app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}`, ...headers } })

    it('keeps a well-formed X-Request-Id, echoes it, puts it in each error and in the request log line', async () => {
      const missing = '0190f3a0-0000-7000-8000-000000000000'
      const res = await get(`/api/v1/assets/${missing}`, { 'x-request-id': 'client.req-42_A' })
      expect(res.statusCode).toBe(404)
      expect(res.headers['x-request-id']).toBe('client.req-42_A')
      expect(res.json()).toEqual({ errors: [{ status: '404', code: 'not_found', detail: expect.any(String), meta: { request_id: 'client.req-42_A' } }] })
      const mine = lines.filter((l) => l.request_id === 'client.req-42_A')
      expect(mine).toEqual([{
        level: 30, time: expect.any(Number), pid: process.pid, hostname: expect.any(String), request_id: 'client.req-42_A',
        method: 'GET', route: '/api/v1/assets/:id', status_code: 404, duration_ms: expect.any(Number),
        org_key: 'acme', api_key_id: keyId, msg: 'request completed',
      }])
    })

    it('replaces an X-Request-Id that is too long or has other characters with a generated one', async () => {
      for (const given of ['a'.repeat(65), 'has space', 'semi;colon', 'ünïcode', '']) {
        const res = await get('/api/v1/assets', { 'x-request-id': given })
        expect(res.statusCode).toBe(200)
        expect(res.headers['x-request-id']).toMatch(UUID)
      }
      const res = await get('/api/v1/assets', { 'x-request-id': 'a'.repeat(64) })
      expect(res.headers['x-request-id']).toBe('a'.repeat(64))
    })

    it('gives every log line the request id and never writes the secret or a body', async () => {
      await app.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${key}`, 'x-request-id': 'with-body' }, payload: { asset_type_key: 'server', name: 'secret-body-value', properties: { hostname: 'h-1' } } })
      await app.inject({ method: 'GET', url: '/api/v1/assets', headers: { authorization: 'Bearer kbis_000000000000_wrong', 'x-request-id': 'bad-key' } })
      const text = lines.map((l) => JSON.stringify(l)).join('\n')
      expect(text).not.toContain(key)
      // The secret is base64url and may itself hold '_': everything after `kbis_<prefix>_`.
      expect(text).not.toContain(key.split('_').slice(2).join('_'))
      expect(text).not.toContain('kbis_000000000000_wrong')
      expect(text).not.toContain('secret-body-value')
      const requestLines = lines.filter((l) => l.msg === 'request completed')
      expect(requestLines.every((l) => typeof l.request_id === 'string')).toBe(true)
      expect(lines.find((l) => l.request_id === 'bad-key')).toMatchObject({ status_code: 401, org_key: null, api_key_id: null, route: '/api/v1/assets' })
      expect(lines.find((l) => l.request_id === 'with-body')).toMatchObject({ status_code: 201, org_key: 'acme', api_key_id: keyId, method: 'POST' })
    })

    it('names the organization of a console user on the request line (no API key)', async () => {
      const t = { app, store } as unknown as TestApp
      await givenPasswords(t, ['owner@acme.test'])
      const browser = new Browser(t)
      expect((await browser.signIn('owner@acme.test')).statusCode).toBe(303)
      expect((await browser.send('GET', '/console/archived', undefined, { 'x-request-id': 'console-line' })).statusCode).toBe(200)
      expect(lines.find((l) => l.request_id === 'console-line')).toMatchObject({ status_code: 200, org_key: 'acme', api_key_id: null, route: '/console/archived' })
    })

    it('exposes the CONTRACT series with the route pattern as label, and counts 429s', async () => {
      const limited = () => (metrics.rateLimited as unknown as { get(): Promise<{ values: { value: number }[] }> }).get().then((m) => m.values[0]?.value ?? 0)
      const before = await limited()
      // The quota is 9 a day; the requests above spent 8 (the unauthenticated one does not count).
      const statuses: number[] = []
      for (let i = 0; i < 4; i++) statuses.push((await get('/api/v1/assets')).statusCode)
      expect(statuses).toEqual([200, 429, 429, 429])
      expect(await limited()).toBe(before + 3)

      // The event of the POST above is stamped by the relay in the background: wait for it.
      await app.events.flush()
      const server = await startMetricsServer(0, '127.0.0.1')
      const text = await (await fetch(server.url)).text()
      // HEAD answers as GET, without the body (a probe's usual request).
      const head = await fetch(server.url, { method: 'HEAD' })
      expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'text/plain; version=0.0.4; charset=utf-8', ''])
      // Its errors are the API's: the envelope, the request id echoed and in meta; a failed
      // collection is reported with its cause and that id.
      const misdirected = await fetch(server.url.replace(/metrics$/, 'nope'), { headers: { 'x-request-id': 'probe-1' } })
      expect([misdirected.status, misdirected.headers.get('x-request-id'), await misdirected.json()]).toEqual([404, 'probe-1',
        { errors: [{ status: '404', code: 'not_found', detail: 'metrics are at GET /metrics', meta: { request_id: 'probe-1' } }] }])
      const reported: [unknown, string][] = []
      const failing = await startMetricsServer(0, '127.0.0.1', { onError: (err, requestId) => reported.push([err, requestId]) })
      new Gauge({ name: 'kbis_test_broken', help: 'a collection that fails', registers: [metrics.registry], collect() { throw new Error('collector broke') } })
      try {
        const broken = await fetch(failing.url, { headers: { 'x-request-id': 'not a plain id!' } })
        const id = broken.headers.get('x-request-id')
        expect(id).toMatch(/^[0-9a-f-]{36}$/)
        expect([broken.status, await broken.json()]).toEqual([500,
          { errors: [{ status: '500', code: 'internal_error', detail: 'metrics could not be collected', meta: { request_id: id } }] }])
        expect(reported.map(([err, requestId]) => [(err as Error).message, requestId])).toEqual([['collector broke', id]])
      } finally {
        metrics.registry.removeSingleMetric('kbis_test_broken')
        await new Promise((resolve) => failing.close(resolve))
      }
      await new Promise((resolve) => server.close(resolve))
      const series = new Set(text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.replace(/[ {].*$/, '')))
      for (const name of ['http_request_duration_seconds_bucket', 'http_request_duration_seconds_count', 'http_request_duration_seconds_sum',
        'kbis_db_pool_connections', 'kbis_events_pending', 'kbis_rate_limited_total', 'process_cpu_seconds_total', 'nodejs_heap_size_used_bytes']) {
        expect(series).toContain(name)
      }
      expect(text).toContain('# TYPE kbis_webhook_deliveries_total counter')
      expect(text).toMatch(/^http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/assets\/:id",status_code="404"\} [1-9]/m)
      expect(text).toMatch(/^http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/assets",status_code="429"\} [3-9]/m)
      expect(text).toMatch(/^kbis_events_pending 0$/m)
      expect(text).toMatch(/^kbis_db_pool_connections\{state="total"\} \d+$/m)
      const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version
      expect(text.split('\n').filter((l) => l.startsWith('kbis_build_info'))).toEqual([`kbis_build_info{version="${version}",nodejs="${process.versions.node}"} 1`])
      expect(text).toContain('# TYPE kbis_result_cache_reads_total counter')
      // Every series of a labelled counter from the start (0 before its first increment), so rate() is 0, not nothing.
      for (const outcome of ['delivered', 'retrying', 'failed']) expect(text).toMatch(new RegExp(`^kbis_webhook_deliveries_total\\{outcome="${outcome}"\\} \\d+$`, 'm'))
      for (const kind of ['count', 'analytics']) {
        for (const outcome of ['hit', 'miss', 'fresh']) expect(text).toMatch(new RegExp(`^kbis_result_cache_reads_total\\{kind="${kind}",outcome="${outcome}"\\} \\d+$`, 'm'))
      }
      expect(text).toContain('# TYPE kbis_store_upkeep_seconds histogram')
      // Concrete paths never become labels.
      expect(text).not.toContain('0190f3a0-0000-7000-8000-000000000000')
    })

    it('answers 503 service_unavailable with Retry-After while draining, keeps /healthz, and runs onShutdown callbacks at close', async () => {
      const calls: string[] = []
      app.onShutdown(async () => { calls.push('relay flushed') })
      app.lifecycle.draining = true
      const res = await get('/api/v1/assets', { 'x-request-id': 'late' })
      expect(res.statusCode).toBe(503)
      expect(res.headers['retry-after']).toBe('5')
      expect(res.headers.connection).toBe('close')
      expect(res.json()).toEqual({ errors: [{ status: '503', code: 'service_unavailable', detail: 'the server is shutting down; retry on another instance or later', meta: { request_id: 'late' } }] })
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503)
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
      expect(calls).toEqual([])
      await app.close()
      expect(calls).toEqual(['relay flushed'])
    })
  })
}
