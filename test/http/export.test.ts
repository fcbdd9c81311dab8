import { request as httpRequest } from 'node:http'
import { gunzipSync } from 'node:zlib'
import { parse } from 'csv-parse/sync'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ndjsonBatchSize } from '../../src/export/service.js'

for (const store of STORES) {
  describe(`${store}: export`, () => {
    let t: TestApp
    const ids: Record<string, string> = {}
    beforeAll(async () => {
      t = await createTestApp(store)
      const items = [
        { asset_type_key: 'server', name: 'web-01', access_domain_key: 'it', properties: { hostname: 'web-01', environment: 'prod', cpu_count: 8, tags: ['pci', 'gdpr'], managed: true, purchased_on: '2024-02-29' } },
        { asset_type_key: 'server', name: 'db, "main"\nprimary', access_domain_key: 'finance', properties: { hostname: 'db-01', environment: 'prod', memory_gb: 12.5 } },
        { asset_type_key: 'server', name: 'dev-01', properties: { hostname: 'dev-01', environment: 'dev' } },
        { asset_type_key: 'server', name: 'gone-01', properties: { hostname: 'gone-01' } },
        { asset_type_key: 'application', name: 'Billing', access_domain_key: 'finance', properties: { code: 'billing' } },
      ]
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      for (const [i, entry] of (res.body.data as { id: string }[]).entries()) ids[items[i]!.name] = entry.id
      await t.request('DELETE', `/api/v1/assets/${ids['gone-01']}`)
    })
    afterAll(async () => t.close())

    const exportRaw = async (query: string, key?: string) => {
      const res = await t.app.inject({ method: 'GET', url: `/api/v1/export/assets?${query}`, headers: { authorization: `Bearer ${key ?? t.adminKey}` } })
      return { status: res.statusCode, type: res.headers['content-type'], body: res.body }
    }
    const record = async (name: string) => (await t.request('GET', `/api/v1/assets/${ids[name]}`)).body.data
    const byId = (names: string[]) => names.map((n) => ids[n]!).sort()

    it('streams every live visible asset as NDJSON, one record (as GET returns it) a line, in id order', async () => {
      const res = await exportRaw('format=ndjson')
      expect(res.status).toBe(200)
      expect(res.type).toBe('application/x-ndjson')
      const lines = res.body.split('\n')
      expect(lines.pop()).toBe('')
      const records = lines.map((l) => JSON.parse(l))
      expect(records.map((r) => r.id)).toEqual(byId(['web-01', 'db, "main"\nprimary', 'dev-01', 'Billing']))
      for (const r of records) expect(r).toEqual(await record(r.name))
      expect((await exportRaw('')).body).toBe(res.body) // NDJSON is the default
    })

    it('answers HEAD with the headers of GET (compressed too) and no body, and refuses what GET refuses', async () => {
      const headers = { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' }
      for (const query of ['format=ndjson', 'format=csv&filter[asset_type_key]=server']) {
        const get = await t.app.inject({ method: 'GET', url: `/api/v1/export/assets?${query}`, headers })
        const head = await t.app.inject({ method: 'HEAD', url: `/api/v1/export/assets?${query}`, headers })
        expect(head.statusCode).toBe(200)
        expect(head.body).toBe('')
        expect(gunzipSync(get.rawPayload).toString().length).toBeGreaterThan(100)
        for (const name of ['content-type', 'content-encoding', 'vary', 'content-length']) expect(head.headers[name], `${query} ${name}`).toEqual(get.headers[name])
      }
      const bad = await t.app.inject({ method: 'HEAD', url: '/api/v1/export/assets?filter[properties.cpu_count]=eight', headers })
      expect(bad.statusCode).toBe(400)
    })

    it('applies the list filters of GET /assets and refuses bad ones as the list does', async () => {
      const prod = await exportRaw('filter[asset_type_key]=server&filter[properties.environment]=prod')
      expect(prod.body.trim().split('\n').map((l) => JSON.parse(l).name).sort()).toEqual(['db, "main"\nprimary', 'web-01'])
      const tagged = await exportRaw('filter[properties.tags]=gdpr')
      expect(tagged.body.trim().split('\n').map((l) => JSON.parse(l).name)).toEqual(['web-01'])
      const none = await exportRaw('filter[name]=nothing-like-this')
      expect(none).toEqual({ status: 200, type: 'application/x-ndjson', body: '' })
      const bad = await exportRaw('filter[properties.cpu_count]=eight')
      expect(bad.status).toBe(400)
      expect(JSON.parse(bad.body).errors[0]).toMatchObject({ status: '400', code: 'invalid_filter', source: { parameter: 'filter[properties.cpu_count]' } })
      const format = await exportRaw('format=xml')
      expect(format.status).toBe(400)
      expect(JSON.parse(format.body).errors[0].code).toBe('invalid_request')
    })

    it('exports only what the key may see, as the list', async () => {
      // it_editor: everything in "it", servers in "finance"; nothing without an access domain.
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const res = await exportRaw('format=ndjson', editor)
      expect(res.body.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(byId(['web-01', 'db, "main"\nprimary']))
      const list = await t.request('GET', '/api/v1/assets?page[size]=100', { key: editor })
      expect(list.body.data.map((a: { id: string }) => a.id).sort()).toEqual(byId(['web-01', 'db, "main"\nprimary']))
    })

    it('writes CSV with the header of CONTRACT §16, multi-selects joined by |, RFC 4180 quoting', async () => {
      const res = await exportRaw('format=csv&filter[asset_type_key]=server')
      expect(res.status).toBe(200)
      expect(res.type).toBe('text/csv')
      const rows = parse(res.body) as string[][]
      expect(rows[0]).toEqual(['id', 'name', 'access_domain_key', 'created_at', 'updated_at', 'hostname', 'environment', 'cpu_count', 'memory_gb', 'purchased_on', 'tags', 'managed', 'owner', 'cost', 'uptime', 'rating', 'homepage', 'notes', 'summary', 'price'])
      const web = await record('web-01')
      const db = await record('db, "main"\nprimary')
      const dev = await record('dev-01')
      const expected = [web, db, dev].sort((a, b) => (a.id < b.id ? -1 : 1))
      const line = (r: { id: string; name: string; access_domain_key: string | null; created_at: string; updated_at: string }, props: string[]) =>
        [r.id, r.name, r.access_domain_key ?? '', r.created_at, r.updated_at, ...props]
      const cells: Record<string, string[]> = {
        [web.id]: ['web-01', 'prod', '8', '', '2024-02-29', 'pci|gdpr', 'true', '', '', '', '', '', '', '', ''],
        [db.id]: ['db-01', 'prod', '', '12.5', '', '', '', '', '', '', '', '', '', '', ''],
        [dev.id]: ['dev-01', 'dev', '', '', '', '', '', '', '', '', '', '', '', '', ''],
      }
      expect(rows.slice(1)).toEqual(expected.map((r) => line(r, cells[r.id]!)))
      expect(res.body).toContain('"db, ""main""\nprimary"')
    })

    it('answers a header alone when nothing matches, and 400 invalid_filter without a known asset type', async () => {
      const empty = await exportRaw('format=csv&filter[asset_type_key]=note')
      expect(empty.body).toBe('id,name,access_domain_key,created_at,updated_at,body\n')
      for (const query of ['format=csv', 'format=csv&filter[asset_type_key]=printer']) {
        const res = await exportRaw(query)
        expect(res.status).toBe(400)
        expect(JSON.parse(res.body)).toEqual({
          errors: [{
            status: '400', code: 'invalid_filter', source: { parameter: 'filter[asset_type_key]' },
            detail: query.includes('printer') ? 'unknown asset type "printer"' : 'a CSV export needs filter[asset_type_key]: its columns are the properties of one asset type',
            meta: { request_id: expect.any(String) },
          }],
        })
      }
    })

    it('reads past one keyset batch and stops reading when the client goes away', async () => {
      // 50,000 rows in one statement (the API would take longer and is not what this tests).
      await t.store.db.query(
        `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'note', 'bulk-note-' || i, 'it', jsonb_build_object('body', repeat('x', 200)), NULL, now(), now()
         FROM generate_series(1, 50000) AS i`, [t.orgId])
      // As the statistics keeper does after the service's own large writes: without statistics
      // PGlite's planner walks the organization again for each batch.
      await t.store.db.query('ANALYZE assets')
      const all = await exportRaw('filter[asset_type_key]=note')
      const lines = all.body.trim().split('\n').map((l) => JSON.parse(l).id as string)
      expect(lines.length).toBe(50_000)
      expect(new Set(lines).size).toBe(50_000)
      expect([...lines].sort()).toEqual(lines)
      // Compressed, the batches are read one ahead instead of two (PostgreSQL): the same text.
      const gz = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?filter[asset_type_key]=note', headers: { authorization: `Bearer ${t.adminKey}`, 'accept-encoding': 'gzip' } })
      expect(gz.headers['content-encoding']).toBe('gzip')
      expect(gunzipSync(gz.rawPayload).toString('utf8')).toBe(all.body)

      const address = await t.app.listen({ host: '127.0.0.1', port: 0 })
      let batches = 0
      // A batch: the rows after an id, up to a limit or through an id found ahead (not that walk itself).
      t.store.db.onQuery = (sql) => { if (/ORDER BY a\.id( LIMIT|$)/.test(sql)) batches++ }
      try {
        await new Promise<void>((resolve, reject) => {
          const req = httpRequest(`${address}/api/v1/export/assets?filter[asset_type_key]=note`, { headers: { authorization: `Bearer ${t.adminKey}` } }, (res) => {
            res.once('data', () => {
              req.destroy()
              resolve()
            })
          })
          req.on('error', () => undefined)
          req.once('error', reject)
          req.end()
        })
        await new Promise((resolve) => setTimeout(resolve, 1000))
        const seen = batches
        await new Promise((resolve) => setTimeout(resolve, 500))
        // The whole export is 5 batches by COPY (PostgreSQL: 3 or 4 are read, two of them ahead),
        // 50 on PGlite (about 13): a few go into socket buffers, then none.
        const whole = 50_000 / ndjsonBatchSize(t.store.db)
        expect(seen).toBeLessThan(Math.min(whole, 30))
        expect(batches).toBe(seen)
      } finally {
        t.store.db.onQuery = null
      }
    }, 60_000)
  })
}

/**
 * A batch read ahead that fails while the client is still reading the previous one: the
 * failure must end that response, not the process (an unhandled rejection would). Lines of
 * 3 KB make a batch (30 MB by COPY, 3 MB on PGlite) more than socket buffers hold.
 */
for (const store of STORES) {
  describe(`${store}: export failing mid-stream`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      await t.store.db.query(
        `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'note', 'note-' || i, 'it', jsonb_build_object('body', repeat('x', 3000)), NULL, now(), now()
         FROM generate_series(1, 12000) AS i`, [t.orgId])
      await t.store.db.query('ANALYZE assets')
    })
    afterAll(async () => t.close())

    it('ends the response when the batch read ahead fails, and the process serves on', async () => {
      const db = t.store.db
      const batchSql = (sql: string) => sql.includes('ORDER BY a.id LIMIT')
      let calls = 0
      const failSecond = () => {
        calls++
        if (calls === 2) return new Promise<never>((_, reject) => setTimeout(() => reject(new Error('injected: the store went away')), 50))
        return null
      }
      const copyLines = db.copyLines?.bind(db)
      const query = db.query.bind(db)
      if (copyLines) db.copyLines = (sql, params) => failSecond() ?? copyLines(sql, params)
      else db.query = ((sql: string, params?: readonly unknown[], options?: object) => (batchSql(sql) && failSecond()) || query(sql, params, options)) as typeof db.query
      const unhandled: unknown[] = []
      const onUnhandled = (reason: unknown) => void unhandled.push(reason)
      process.on('unhandledRejection', onUnhandled)
      try {
        const address = await t.app.listen({ host: '127.0.0.1', port: 0 })
        const outcome = await new Promise<{ status: number; complete: boolean; bytes: number }>((resolve) => {
          const req = httpRequest(`${address}/api/v1/export/assets?filter[asset_type_key]=note`, { headers: { authorization: `Bearer ${t.adminKey}` } }, (res) => {
            let bytes = 0
            res.once('data', (chunk: Buffer) => {
              bytes += chunk.length
              // Read nothing for a while: the batch read ahead fails meanwhile.
              res.pause()
              setTimeout(() => {
                res.on('data', (more: Buffer) => { bytes += more.length })
                res.resume()
              }, 400)
            })
            res.on('end', () => resolve({ status: res.statusCode ?? 0, complete: res.complete, bytes }))
            res.on('error', () => resolve({ status: res.statusCode ?? 0, complete: false, bytes }))
            res.on('aborted', () => resolve({ status: res.statusCode ?? 0, complete: false, bytes }))
          })
          req.on('error', () => resolve({ status: 0, complete: false, bytes: 0 }))
          req.end()
        })
        expect(calls).toBeGreaterThanOrEqual(2)
        expect(outcome.status).toBe(200)
        expect(outcome.complete).toBe(false)
        expect(outcome.bytes).toBeGreaterThan(0)
        await new Promise((resolve) => setTimeout(resolve, 100))
        expect(unhandled).toEqual([])
      } finally {
        process.off('unhandledRejection', onUnhandled)
        if (copyLines) db.copyLines = copyLines
        else db.query = query
      }
      // The same process answers the next export whole.
      const again = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?filter[asset_type_key]=note', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(again.statusCode).toBe(200)
      expect(again.body.trim().split('\n')).toHaveLength(12_000)
    }, 60_000)
  })
}

/**
 * Rows written while an export runs, after the part it has read: the export goes on past the
 * batch it expected to be the last. On PostgreSQL the last batch is the one whose end was not
 * found ahead (fewer than a batch followed); the rows are added just before it is read, and it
 * comes back full. On PGlite every batch reads after the previous one's last id.
 */
for (const store of STORES) {
  describe(`${store}: export while rows are added`, () => {
    let t: TestApp
    const insertNotes = (from: number, count: number, id: string) => t.store.db.query(
      `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
       SELECT $1, ${id}, 'note', 'note-' || i, 'it', '{}'::jsonb, NULL, now(), now() FROM generate_series($2::int, $3::int) AS i`,
      [t.orgId, from, from + count - 1])
    beforeAll(async () => {
      t = await createTestApp(store)
      await insertNotes(1, 12_000, 'gen_random_uuid()')
      await t.store.db.query('ANALYZE assets')
    })
    afterAll(async () => t.close())

    it('exports the rows added after the part read, whole and in id order', async () => {
      const db = t.store.db
      const size = ndjsonBatchSize(db)
      let added = false
      // Ids above every random one: they sort after all the rows the export has read.
      const addLate = async () => {
        if (added) return
        added = true
        await insertNotes(100_001, 15_000, `('ffffffff-ffff-4fff-8fff-' || lpad(to_hex(i), 12, '0'))::uuid`)
      }
      const copyLines = db.copyLines?.bind(db)
      const query = db.query.bind(db)
      let lastBatchFull = false
      let batches = 0
      if (copyLines) {
        db.copyLines = async (sql, params) => {
          // The batch without an end found ahead: 2,000 rows followed when its start was found.
          if (/ORDER BY a\.id LIMIT/.test(sql)) await addLate()
          const chunks = await copyLines(sql, params)
          if (/ORDER BY a\.id LIMIT/.test(sql) && !lastBatchFull) lastBatchFull = Buffer.concat(chunks).toString('utf8').split('\n').length - 1 === size
          return chunks
        }
      } else {
        db.query = (async (sql: string, params?: readonly unknown[], options?: object) => {
          // The second batch: the first has been read.
          if (/ORDER BY a\.id LIMIT/.test(sql) && ++batches === 2) await addLate()
          return query(sql, params, options)
        }) as typeof db.query
      }
      try {
        const res = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?filter[asset_type_key]=note', headers: { authorization: `Bearer ${t.adminKey}` } })
        expect(res.statusCode).toBe(200)
        const exported = res.body.trim().split('\n').map((l) => JSON.parse(l) as { id: string; name: string })
        expect(added).toBe(true)
        expect(exported).toHaveLength(27_000)
        expect(new Set(exported.map((r) => r.id)).size).toBe(27_000)
        expect(exported.map((r) => r.id)).toEqual(exported.map((r) => r.id).sort())
        expect(exported.at(-1)!.name).toBe('note-115000')
        // PostgreSQL: the batch that was to be the last came back full, and the export went on.
        expect(lastBatchFull).toBe(copyLines !== undefined)
      } finally {
        if (copyLines) db.copyLines = copyLines
        else db.query = query
      }
    }, 60_000)
  })
}

/**
 * Where the process holds a whole batch (CSV on both stores, NDJSON on PGlite), rows of large
 * documents come fewer at a time: a batch's text stays about EXPORT_BATCH_BYTES (an outside
 * audit's PGlite server grew by 120 MB, for good, exporting notes of 60 KB a thousand at a time).
 */
for (const store of STORES) {
  describe(`${store}: export batches of large rows`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      await t.store.db.query(
        `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'note', 'big-' || i, 'it', jsonb_build_object('body', repeat('y', 60000)), NULL, now(), now()
         FROM generate_series(1, 400) AS i`, [t.orgId])
    })
    afterAll(async () => t.close())

    it('reads a first batch of 100 rows, then as many as fit 4 MB of text', async () => {
      const db = t.store.db
      const query = db.query.bind(db)
      const limits: number[] = []
      db.query = ((sql: string, params?: readonly unknown[], options?: object) => {
        if (sql.includes('ORDER BY a.id LIMIT')) limits.push(Number(params!.at(-1)))
        return query(sql, params, options)
      }) as typeof db.query
      try {
        for (const format of db.copyLines ? ['csv'] : ['csv', 'ndjson']) {
          limits.length = 0
          const res = await t.app.inject({ method: 'GET', url: `/api/v1/export/assets?format=${format}&filter[asset_type_key]=note`, headers: { authorization: `Bearer ${t.adminKey}` } })
          expect(res.statusCode).toBe(200)
          expect(res.body.trim().split('\n')).toHaveLength(format === 'csv' ? 401 : 400)
          // 100, then 4 MB / ≈ 60 KB a row ≈ 69 rows a batch, until fewer than asked come back.
          expect(limits[0], format).toBe(100)
          expect(limits.slice(1).every((n) => n >= 60 && n <= 70), `${format}: ${limits.join(', ')}`).toBe(true)
          expect(limits.length, format).toBe(1 + Math.ceil(300 / limits[1]!) + (300 % limits[1]! === 0 ? 1 : 0))
        }
      } finally {
        db.query = query
      }
    })
  })
}
