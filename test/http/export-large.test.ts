import { request as httpRequest } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

const ROWS = 200_000
// Each record carries 300 bytes of text, so the export is ~100 MB: more than the RSS it may grow by
// (a server that held the export, as strings and rows, would grow by several times that).
const MAX_RSS_GROWTH_MB = 60

// PostgreSQL first: memory the PGlite half releases would otherwise hide what the PostgreSQL export grows by.
for (const store of [...STORES].reverse()) {
  describe(`${store}: export of ${ROWS} assets`, () => {
    let t: TestApp
    let address: string
    beforeAll(async () => {
      t = await createTestApp(store)
      // Seeded with one INSERT … SELECT generate_series: 20 × 10,000 through /bulk would take
      // minutes on this machine and is not what this test is about.
      await t.store.db.query(
        `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'note', 'note-' || i, 'it', jsonb_build_object('body', repeat('n', 300)), NULL,
                date_trunc('second', now()), date_trunc('second', now())
         FROM generate_series(1, ${ROWS}) AS i`, [t.orgId])
      // What the statistics keeper does after the service's own large writes (this INSERT went
      // around them): without statistics PGlite's planner walks the whole organization for each
      // keyset batch (index on (org_id, asset_type_key, name, id), then a sort), ≈ 40 s instead
      // of 2 s for the export.
      await t.store.db.query('ANALYZE assets')
      address = await t.app.listen({ host: '127.0.0.1', port: 0 })
    }, 300_000)
    afterAll(async () => t?.close())

    it('streams every row in constant memory (RSS sampled while it runs)', async () => {
      globalThis.gc?.()
      const baseline = process.memoryUsage().rss
      let peak = baseline
      const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 20)
      let lines = 0
      let bytes = 0
      let first = ''
      let tail = ''
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${address}/api/v1/export/assets?format=ndjson`, { headers: { authorization: `Bearer ${t.adminKey}` } }, (res) => {
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            bytes += chunk.length
            for (let i = chunk.indexOf('\n'); i !== -1; i = chunk.indexOf('\n', i + 1)) lines++
            if (first.length < 2000) first += chunk.slice(0, 2000)
            tail = (tail + chunk).slice(-3000)
          })
          res.on('end', () => resolve(res.statusCode ?? 0))
          res.on('error', reject)
        })
        req.on('error', reject)
        req.end()
      })
      clearInterval(sampler)
      const growthMb = (peak - baseline) / 1024 ** 2
      process.stdout.write(`${store}: exported ${lines} rows, ${(bytes / 1024 ** 2).toFixed(0)} MB; RSS ${(baseline / 1024 ** 2).toFixed(0)} → peak ${(peak / 1024 ** 2).toFixed(0)} MB (+${growthMb.toFixed(0)})\n`)
      expect(status).toBe(200)
      expect(lines).toBe(ROWS)
      expect(bytes).toBeGreaterThan(ROWS * 300)
      const firstRecord = JSON.parse(first.slice(0, first.indexOf('\n')))
      expect(firstRecord).toEqual({
        id: expect.any(String), asset_type_key: 'note', name: expect.stringMatching(/^note-\d+$/), access_domain_key: 'it',
        properties: { body: 'n'.repeat(300) }, created_at: expect.any(String), updated_at: firstRecord.created_at,
      })
      const lastLines = tail.trimEnd().split('\n')
      expect(JSON.parse(lastLines[lastLines.length - 1]!).asset_type_key).toBe('note')
      expect(growthMb).toBeLessThan(MAX_RSS_GROWTH_MB)
    }, 300_000)
  })
}
