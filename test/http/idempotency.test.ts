import { createHash } from 'node:crypto'
import { connect } from 'node:net'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import pg from 'pg'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { purgeExpiredKeys } from '../../src/idempotency/hooks.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'

const server = (hostname: string) => ({ asset_type_key: 'server', name: hostname, properties: { hostname, environment: 'prod' } })

for (const store of STORES) {
  describe(`${store}: Idempotency-Key`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    /** The raw answer: the body as bytes, to compare replays byte for byte. */
    const send = async (method: string, url: string, key: string | null, body?: unknown, apiKey = t.adminKey) => {
      const res = await t.app.inject({
        method: method as 'POST', url,
        headers: { authorization: `Bearer ${apiKey}`, ...(key !== null ? { 'idempotency-key': key } : {}) },
        ...(body !== undefined ? { payload: body as object } : {}),
      })
      return { status: res.statusCode, raw: res.body, replayed: res.headers['idempotent-replayed'], type: res.headers['content-type'], retryAfter: res.headers['retry-after'] }
    }
    const count = async (pattern: string): Promise<number> =>
      (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE unique_value LIKE $1', [pattern])).rows[0]!.n

    it('replays the first answer byte for byte with Idempotent-Replayed: true and writes nothing more', async () => {
      const first = await send('POST', '/api/v1/assets', 'create-web-1', server('idem-web-1'))
      expect(first.status).toBe(201)
      expect(first.replayed).toBeUndefined()
      await new Promise((resolve) => setTimeout(resolve, 1100)) // a second later: timestamps would differ if it ran again
      const again = await send('POST', '/api/v1/assets', 'create-web-1', server('idem-web-1'))
      expect(again).toEqual({ status: 201, raw: first.raw, replayed: 'true', type: 'application/json; charset=utf-8' })
      expect(await count('idem-web-1')).toBe(1)
    })

    it('keeps answers sealed: a new API key secret is replayed to its caller but is nowhere in the store', async () => {
      const body = { name: 'idem-secret', permission_type: 'Viewer', role_keys: ['all'] }
      const first = await send('POST', '/api/v1/api-keys', 'key-secret-1', body)
      expect(first.status).toBe(201)
      const secret = JSON.parse(first.raw).data.secret as string
      expect(secret).toMatch(/^kbis_/)
      const again = await send('POST', '/api/v1/api-keys', 'key-secret-1', body)
      expect(again).toEqual({ status: 201, raw: first.raw, replayed: 'true', type: 'application/json; charset=utf-8' })
      // kbis_<12 hex>_<43 base64url characters>: the random part may itself hold underscores.
      const secretPart = secret.split('_').slice(2).join('_')
      expect(secretPart).toHaveLength(43)
      const rows = (await t.store.db.query<{ text: string }>('SELECT t::text AS text FROM idempotency_keys t')).rows
      expect(rows.length).toBeGreaterThan(0)
      expect(rows.filter((row) => row.text.includes(secretPart))).toEqual([])
      // Not even an asset's answer is kept readable.
      await send('POST', '/api/v1/assets', 'sealed-asset-1', server('idem-sealed-web'))
      expect(rows.concat((await t.store.db.query<{ text: string }>('SELECT t::text AS text FROM idempotency_keys t')).rows).some((row) => row.text.includes('idem-sealed-web'))).toBe(false)
    })

    it('answers 422 idempotency_key_reused for another body or query string and writes nothing', async () => {
      expect((await send('POST', '/api/v1/assets', 'reuse-1', server('idem-reuse-1'))).status).toBe(201)
      const other = await send('POST', '/api/v1/assets', 'reuse-1', server('idem-reuse-2'))
      expect(other.status).toBe(422)
      expect(JSON.parse(other.raw)).toEqual({
        errors: [{ status: '422', code: 'idempotency_key_reused', detail: 'this Idempotency-Key was used for another request (another body or query string) to this method and path in the last 24 hours', meta: { request_id: expect.any(String) } }],
      })
      const otherQuery = await send('POST', '/api/v1/assets?dry_run=true', 'reuse-1', server('idem-reuse-1'))
      expect(JSON.parse(otherQuery.raw).errors[0].code).toBe('idempotency_key_reused')
      expect(await count('idem-reuse-%')).toBe(1)
    })

    it('takes a body whose members come in another order, at any depth, as the same body; items in another order are another body', async () => {
      const body = { asset_type_key: 'server', name: 'idem-order-1', properties: { hostname: 'idem-order-1', environment: 'prod', tags: ['pci', 'gdpr'] } }
      const first = await send('POST', '/api/v1/assets', 'order-1', body)
      expect(first.status).toBe(201)
      const reordered = { properties: { tags: ['pci', 'gdpr'], environment: 'prod', hostname: 'idem-order-1' }, name: 'idem-order-1', asset_type_key: 'server' }
      expect(await send('POST', '/api/v1/assets', 'order-1', reordered)).toEqual({ status: 201, raw: first.raw, replayed: 'true', type: 'application/json; charset=utf-8' })
      const items = await send('POST', '/api/v1/assets', 'order-1', { ...body, properties: { ...body.properties, tags: ['gdpr', 'pci'] } })
      expect(JSON.parse(items.raw).errors[0].code).toBe('idempotency_key_reused')
      expect(await count('idem-order-%')).toBe(1)
    })

    it('replays a key a version before 3bfe1b0 claimed (its fingerprint of the members as sent) to the identical repeat, after an upgrade', async () => {
      const body = { properties: { tags: ['pci'], environment: 'prod', hostname: 'idem-legacy-1' }, name: 'idem-legacy-1', asset_type_key: 'server' }
      const first = await send('POST', '/api/v1/assets', 'legacy-1', body)
      expect(first.status).toBe(201)
      // What such a version stored: the body's members in the order they were sent.
      const legacy = createHash('sha256').update(`POST\n/api/v1/assets\n\n${JSON.stringify(body)}`).digest('hex')
      const rewritten = await t.store.db.query(`UPDATE idempotency_keys SET fingerprint = $1 WHERE idempotency_key = 'legacy-1'`, [legacy])
      expect(rewritten.rowCount).toBe(1)
      expect(await send('POST', '/api/v1/assets', 'legacy-1', body)).toEqual({ status: 201, raw: first.raw, replayed: 'true', type: 'application/json; charset=utf-8' })
      // Another body is still another body.
      const other = await send('POST', '/api/v1/assets', 'legacy-1', { ...body, name: 'idem-legacy-2' })
      expect(JSON.parse(other.raw).errors[0].code).toBe('idempotency_key_reused')
      expect(await count('idem-legacy-%')).toBe(1)
    })

    it('scopes a key by API key, method and path', async () => {
      const otherKey = await t.givenKey({ type: 'Editor' })
      expect((await send('POST', '/api/v1/assets', 'scope-1', server('idem-scope-a'))).status).toBe(201)
      const byOtherKey = await send('POST', '/api/v1/assets', 'scope-1', server('idem-scope-b'), otherKey)
      expect(byOtherKey.status).toBe(201)
      expect(byOtherKey.replayed).toBeUndefined()
      const id = JSON.parse(byOtherKey.raw).data.id as string
      const patch = await send('PATCH', `/api/v1/assets/${id}`, 'scope-1', { name: 'renamed' })
      expect(patch.status).toBe(200)
      expect(JSON.parse(patch.raw).data.name).toBe('renamed')
      expect(await count('idem-scope-%')).toBe(2)
    })

    it('takes spellings of one path as one path: a trailing slash, percent-encoding', async () => {
      const first = await send('POST', '/api/v1/assets', 'spelling-1', server('idem-spelling-a'))
      expect(first.status).toBe(201)
      const slashed = await send('POST', '/api/v1/assets/', 'spelling-1', server('idem-spelling-a'))
      expect([slashed.status, slashed.replayed, slashed.raw]).toEqual([201, 'true', first.raw])
      const put = await send('PUT', '/api/v1/assets/server:hostname:idem-spelling-b', 'spelling-2', { name: 'b', properties: { hostname: 'idem-spelling-b' } })
      expect(put.status).toBe(201)
      for (const url of ['/api/v1/assets/server%3Ahostname%3Aidem-spelling-b', '/api/v1/assets/server:hostname:idem-spelling-%62/']) {
        const again = await send('PUT', url, 'spelling-2', { name: 'b', properties: { hostname: 'idem-spelling-b' } })
        expect([again.status, again.replayed, again.raw], url).toEqual([201, 'true', put.raw])
      }
      // A value holding what a path cannot spell plainly is still its own path.
      const other = await send('PUT', '/api/v1/assets/server:hostname:idem-spelling-b%2Fc', 'spelling-2', { name: 'b', properties: { hostname: 'idem-spelling-b/c' } })
      expect(other.replayed).toBeUndefined()
      expect(await count('idem-spelling-%')).toBe(2)
    })

    it('refuses a key that is empty, longer than 255 or not visible ASCII with 400 invalid_request, writing nothing', async () => {
      for (const bad of ['', 'a'.repeat(256), 'has space', 'tab\there']) {
        const res = await send('POST', '/api/v1/assets', bad, server('idem-bad'))
        expect(res.status).toBe(400)
        expect(JSON.parse(res.raw)).toEqual({ errors: [{ status: '400', code: 'invalid_request', detail: 'Idempotency-Key must be 1 to 255 visible ASCII characters, sent once', meta: { request_id: expect.any(String) } }] })
      }
      expect(await count('idem-bad')).toBe(0)
      const longest = await send('POST', '/api/v1/assets', `${'~'.repeat(254)}!`, server('idem-longest'))
      expect(longest.status).toBe(201)
    })

    it('ignores the header on reads', async () => {
      const res = await send('GET', '/api/v1/assets?filter[name]=idem-web-1', 'has space')
      expect(res.status).toBe(200)
      expect(JSON.parse(res.raw).data.map((a: { name: string }) => a.name)).toEqual(['idem-web-1'])
    })

    it('stores refusals too: a repeated invalid write gets the same 422, and DELETE replays its 204', async () => {
      const invalid = { ...server('idem-invalid'), properties: { hostname: 'idem-invalid', cpu_count: 'eight' } }
      const first = await send('POST', '/api/v1/assets', 'invalid-1', invalid)
      expect(first.status).toBe(422)
      expect(await send('POST', '/api/v1/assets', 'invalid-1', invalid)).toEqual({ ...first, replayed: 'true' })

      const created = await send('POST', '/api/v1/assets', null, server('idem-delete'))
      const id = JSON.parse(created.raw).data.id as string
      const archived = await send('DELETE', `/api/v1/assets/${id}`, 'delete-1')
      expect(archived).toEqual({ status: 204, raw: '', replayed: undefined, type: undefined })
      // Without the key the repeat would be 404 (archived); with it, the first answer.
      expect(await send('DELETE', `/api/v1/assets/${id}`, 'delete-1')).toEqual({ status: 204, raw: '', replayed: 'true', type: undefined })
      expect((await send('DELETE', `/api/v1/assets/${id}`, null)).status).toBe(404)
    })

    it('stores a body refused as malformed (not JSON, not UTF-8) as any refusal: the same bytes replay, others are another request', async () => {
      const raw = (url: string, key: string | null, payload: string | Buffer) => t.app.inject({
        method: 'POST', url, payload,
        headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json', ...(key !== null ? { 'idempotency-key': key } : {}) },
      })
      for (const [url, key, payload] of [
        ['/api/v1/assets', 'malformed-1', '{"asset_type_key": "note", "name": '],
        ['/api/v1/bulk/assets', 'malformed-2', '[{"asset_type_key": "note"'],
        ['/api/v1/assets', 'malformed-3', Buffer.from('{"asset_type_key":"note","name":"Caf\u00e9"}', 'latin1')],
      ] as const) {
        const first = await raw(url, key, payload)
        expect(first.statusCode, key).toBe(400)
        expect(first.headers['idempotent-replayed']).toBeUndefined()
        const again = await raw(url, key, payload)
        expect([again.statusCode, again.body, again.headers['idempotent-replayed']], key).toEqual([400, first.body, 'true'])
        // Other bytes, malformed or not, are another request with the same key.
        for (const other of ['{"asset_type_key": "note", "name": 1', JSON.stringify(url.includes('bulk') ? [server('idem-m')] : server('idem-m'))]) {
          expect(JSON.parse((await raw(url, key, other)).body).errors[0].code, `${key} ${other}`).toBe('idempotency_key_reused')
        }
      }
      // Without a key, as before: refused, nothing kept.
      expect((await raw('/api/v1/assets', null, '{')).statusCode).toBe(400)
      expect(await count('idem-m')).toBe(0)
    })

    it('stores a 413 (a body over the byte limit) as any refusal: a repeat over the limit replays it, a body that is read is another request', async () => {
      const big = JSON.stringify(server(`idem-big-${'x'.repeat(t.app.config.bodyLimit)}`))
      const first = await send('POST', '/api/v1/assets', 'too-large-1', big)
      expect([first.status, first.replayed]).toEqual([413, undefined])
      expect(JSON.parse(first.raw).errors[0].code).toBe('payload_too_large')
      const again = await send('POST', '/api/v1/assets', 'too-large-1', big)
      expect([again.status, again.raw, again.replayed, again.type]).toEqual([413, first.raw, 'true', first.type])
      const small = await send('POST', '/api/v1/assets', 'too-large-1', server('idem-big-small'))
      expect([small.status, JSON.parse(small.raw).errors[0].code]).toEqual([422, 'idempotency_key_reused'])
      // Another oversized body (another length), or another query string: another request, not the replay.
      const longer = await send('POST', '/api/v1/assets', 'too-large-1', JSON.stringify(server(`idem-big-${'y'.repeat(t.app.config.bodyLimit + 10)}`)))
      expect([longer.status, JSON.parse(longer.raw).errors[0].code, longer.replayed]).toEqual([422, 'idempotency_key_reused', undefined])
      const query = await send('POST', '/api/v1/assets?dry_run=true', 'too-large-1', big)
      expect([query.status, JSON.parse(query.raw).errors[0].code]).toEqual([422, 'idempotency_key_reused'])
      // A key that answered a body it read: an oversized repeat is another body.
      expect((await send('POST', '/api/v1/assets', 'too-large-2', server('idem-big-first'))).status).toBe(201)
      expect(JSON.parse((await send('POST', '/api/v1/assets', 'too-large-2', big)).raw).errors[0].code).toBe('idempotency_key_reused')
      expect(await count('idem-big-small')).toBe(0)
      // Another path, or no key: nothing kept.
      expect((await send('POST', '/api/v1/bulk/assets', 'too-large-1', [server('idem-big-bulk')])).status).toBe(201)
      expect((await send('POST', '/api/v1/assets', null, big)).replayed).toBeUndefined()
    })

    it('runs concurrent duplicates of one key exactly once: the others get 409 idempotency_key_in_use or the replay', async () => {
      const items = Array.from({ length: 300 }, (_, i) => server(`idem-conc-${i}`))
      const answers = await Promise.all(Array.from({ length: 8 }, () => send('POST', '/api/v1/bulk/assets', 'bulk-1', items)))
      const ran = answers.filter((a) => a.status === 201 && a.replayed === undefined)
      expect(ran).toHaveLength(1)
      for (const a of answers) {
        if (a === ran[0]) continue
        if (a.status === 409) {
          expect(JSON.parse(a.raw)).toEqual({ errors: [{ status: '409', code: 'idempotency_key_in_use', detail: 'the first request with this Idempotency-Key is still running; retry when it has answered', meta: { request_id: expect.any(String) } }] })
          expect(a.retryAfter).toBe('1')
        } else expect(a).toEqual({ ...ran[0], replayed: 'true' })
      }
      expect(await count('idem-conc-%')).toBe(300)
      const later = await send('POST', '/api/v1/bulk/assets', 'bulk-1', items)
      expect(later).toEqual({ ...ran[0], replayed: 'true' })
    })

    it('replays a completed answer to every one of several repeats sent at once (none is told the first still runs)', async () => {
      const first = await send('POST', '/api/v1/assets', 'done-1', server('idem-done-1'))
      expect(first.status).toBe(201)
      for (let round = 0; round < 3; round++) {
        const repeats = await Promise.all(Array.from({ length: 6 }, () => send('POST', '/api/v1/assets', 'done-1', server('idem-done-1'))))
        expect(repeats).toEqual(Array.from({ length: 6 }, () => ({ ...first, replayed: 'true' })))
      }
      expect(await count('idem-done-1')).toBe(1)
    })

    it('answers a repeat sent while the first request runs 409 at once, without waiting for the organization\'s turn behind it', async () => {
      // The first request is held where it claims its key (the table locked by a transaction of the
      // test's): on PGlite that transaction holds the one connection, as a long write would.
      let unlock = (): void => undefined
      const held = new Promise<void>((resolve) => { unlock = resolve })
      let locked = (): void => undefined
      const isLocked = new Promise<void>((resolve) => { locked = resolve })
      const holder = t.store.db.transaction(async (tx) => {
        await tx.query('LOCK TABLE idempotency_keys IN EXCLUSIVE MODE')
        locked()
        await held
      })
      await isLocked
      const items = [server('idem-wait-1'), server('idem-wait-2')]
      const first = send('POST', '/api/v1/bulk/assets', 'wait-1', items)
      try {
        await new Promise((resolve) => setTimeout(resolve, 100))
        const waited = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 3000))
        const repeat = await Promise.race([send('POST', '/api/v1/bulk/assets', 'wait-1', items), waited])
        const other = await Promise.race([send('POST', '/api/v1/bulk/assets', 'wait-1', items.slice(1)), waited])
        expect(repeat).toMatchObject({ status: 409 })
        expect(JSON.parse((repeat as { raw: string }).raw).errors[0].code).toBe('idempotency_key_in_use')
        expect(JSON.parse((other as { raw: string }).raw).errors[0].code).toBe('idempotency_key_reused')
      } finally {
        unlock()
        await holder
      }
      expect((await first).status).toBe(201)
      expect(await send('POST', '/api/v1/bulk/assets', 'wait-1', items)).toEqual({ ...(await first), replayed: 'true' })
    })

    it('answers a repeat over HTTP 409 while the first still runs its statements (the process reads its sockets between them)', async () => {
      // When PGlite ran its statements in the server's own thread, nothing that arrived during a
      // bulk was read before it had answered, and a repeat got the replay where CONTRACT §16 says
      // 409 (decision 0025: PGlite has a thread of its own now).
      const base = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }))
      const body = JSON.stringify(Array.from({ length: 5000 }, (_, i) => server(`idem-busy-${i}`)))
      const request = [
        'POST /api/v1/bulk/assets HTTP/1.1', `Host: ${base.host}`, `Authorization: Bearer ${t.adminKey}`, 'Content-Type: application/json',
        'Idempotency-Key: busy-1', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', '', body,
      ].join('\r\n')
      // The repeat's whole request is in its socket (as a client's would be, on another host) from
      // the moment the first claims its key, its statements (5,000 rows, their events) still to run.
      const repeat = connect(Number(base.port), '127.0.0.1')
      await once(repeat, 'connect')
      let answer = ''
      repeat.on('data', (chunk: Buffer) => void (answer += chunk.toString()))
      const repeated = once(repeat, 'end')
      let sent = false
      t.store.db.onQuery = (sql) => {
        if (!sent && sql.includes('INSERT INTO idempotency_keys')) {
          sent = true
          repeat.write(request)
        }
      }
      try {
        const first = await fetch(`${base.origin}/api/v1/bulk/assets`, {
          method: 'POST', body, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json', 'idempotency-key': 'busy-1' },
        })
        expect(first.status).toBe(201)
        await repeated
        // 409 only while the first runs: once it has answered, a repeat gets its replay.
        expect(answer).toMatch(/^HTTP\/1\.1 409 /)
        expect(answer).toContain('"code":"idempotency_key_in_use"')
      } finally {
        t.store.db.onQuery = null
        repeat.destroy()
      }
      expect(await count('idem-busy-%')).toBe(5000)
    })

    it('answers 409 idempotency_key_in_use while the first request has not answered', async () => {
      const first = await send('POST', '/api/v1/assets', 'running-1', server('idem-running'))
      expect(first.status).toBe(201)
      // Back to the state of a claim whose request is still running (deterministic, unlike a race).
      await t.store.db.query(`UPDATE idempotency_keys SET status = NULL, body = NULL WHERE idempotency_key = 'running-1'`)
      const repeat = await send('POST', '/api/v1/assets', 'running-1', server('idem-running'))
      expect(repeat.status).toBe(409)
      expect(JSON.parse(repeat.raw)).toEqual({ errors: [{ status: '409', code: 'idempotency_key_in_use', detail: 'the first request with this Idempotency-Key is still running; retry when it has answered', meta: { request_id: expect.any(String) } }] })
      // To be sent again: it runs, or is replayed, once the first has answered.
      expect(repeat.retryAfter).toBe('1')
      expect(await count('idem-running')).toBe(1)
    })

    it('forgets a key after 24 h: the repeat runs again and the purge deletes expired keys', async () => {
      expect((await send('POST', '/api/v1/assets', 'expire-1', { ...server('idem-expire'), name: 'one' })).status).toBe(201)
      await t.store.db.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = 'expire-1'`)
      // The first asset holds the unique hostname; running again proves the key no longer answers.
      const again = await send('POST', '/api/v1/assets', 'expire-1', { ...server('idem-expire'), name: 'one' })
      expect(again.replayed).toBeUndefined()
      expect(JSON.parse(again.raw).errors[0].code).toBe('unique_violation')
      await t.store.db.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = 'expire-1'`)
      expect(await purgeExpiredKeys(t.store.db)).toBe(1)
      const left = await t.store.db.query(`SELECT 1 FROM idempotency_keys WHERE idempotency_key = 'expire-1'`)
      expect(left.rows).toEqual([])
    })

    it('takes over a claim left running by a process that died (no heartbeat for 30 s)', async () => {
      const stale = await t.store.db.query<{ id: string }>('SELECT id FROM api_keys LIMIT 1')
      await t.store.db.query(
        `INSERT INTO idempotency_keys (org_id, api_key_id, method, path, idempotency_key, fingerprint, claim_id, created_at, expires_at)
         SELECT org_id, id, 'POST', '/api/v1/assets', 'stale-1', 'x', gen_random_uuid(), now() - interval '31 seconds', now() + interval '1 day'
         FROM api_keys WHERE id = $1`, [stale.rows[0]!.id])
      const keyOfRow = await t.store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key = 'stale-1'`)
      expect(keyOfRow.rows[0]!.n).toBe(1)
      // The row belongs to some key of the organization; the admin key's own claim is fresh.
      const res = await send('POST', '/api/v1/assets', 'stale-1', server('idem-stale'))
      expect(res.status).toBe(201)
    })

    it('never runs again a request whose changes committed before its answer was kept (its server stopped in between): 409, nothing written twice', async () => {
      const bulk = ['idem-lost-1', 'idem-lost-2', 'idem-lost-3'].map(server)
      expect((await send('POST', '/api/v1/bulk/assets', 'lost-1', bulk)).status).toBe(201)
      const written = async (key: string) => (await t.store.db.query<{ written: boolean }>('SELECT written FROM idempotency_keys WHERE idempotency_key = $1', [key])).rows[0]?.written
      // The mark commits with the changes; a dry run and a refusal roll it back with theirs.
      expect(await written('lost-1')).toBe(true)
      expect((await send('POST', '/api/v1/bulk/assets?dry_run=true', 'lost-dry', [server('idem-lost-dry')])).status).toBe(200)
      expect((await send('POST', '/api/v1/bulk/assets', 'lost-refused', [server('idem-lost-1')])).status).toBe(409)
      expect([await written('lost-dry'), await written('lost-refused')]).toEqual([false, false])
      // As a server that died between the commit and storing the answer leaves the key: no answer,
      // no heartbeat for 31 s.
      await t.store.db.query(`UPDATE idempotency_keys SET status = NULL, headers = NULL, body = NULL, created_at = now() - interval '31 seconds' WHERE idempotency_key = 'lost-1'`)
      for (let i = 0; i < 2; i++) {
        const again = await send('POST', '/api/v1/bulk/assets', 'lost-1', bulk)
        expect([again.status, JSON.parse(again.raw).errors[0].code]).toEqual([409, 'idempotency_key_in_use'])
        expect(JSON.parse(again.raw).errors[0].detail).toMatch(/^the first request with this Idempotency-Key wrote its changes, but its server stopped before it could keep the answer: the request is not run again/)
        // Not to be sent again (it would get this answer for 24 hours): no Retry-After, unlike the 409 of a request still running.
        expect(again.retryAfter).toBeUndefined()
      }
      expect(await count('idem-lost-%')).toBe(3)
    })
  })
}

describe.runIf(STORES.includes('postgres'))('postgres: Idempotency-Key claims of running requests', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await createTestApp('postgres')
  })
  afterAll(async () => t.close())
  const send = async (key: string, body: unknown) => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': key }, payload: body as object })
    return { status: res.statusCode }
  }

  it('keeps the claim of a request still running alive (its heartbeat), so it is never taken for a dead one', { timeout: 30_000 }, async () => {
    // The request waits for a lock this test holds, with its claim made to look 40 s old.
    const blocker = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL, options: `-c search_path=${t.store.schema}` })
    await blocker.connect()
    try {
      await blocker.query('BEGIN')
      await blocker.query('LOCK TABLE assets IN SHARE MODE')
      const running = send('heartbeat-1', server('idem-heartbeat'))
      const age = async () => (await t.store.db.query<{ s: number }>(`SELECT extract(epoch FROM now() - created_at)::float8 AS s FROM idempotency_keys WHERE idempotency_key = 'heartbeat-1' AND status IS NULL`)).rows[0]?.s
      await expect.poll(age, { timeout: 5_000 }).toBeDefined()
      await t.store.db.query(`UPDATE idempotency_keys SET created_at = now() - interval '40 seconds' WHERE idempotency_key = 'heartbeat-1'`)
      expect(await age()).toBeGreaterThan(39)
      await expect.poll(age, { timeout: 8_000, interval: 200 }).toBeLessThan(6)
      await blocker.query('ROLLBACK')
      expect((await running).status).toBe(201)
    } finally {
      await blocker.end()
    }
  })
})

describe('pglite: claims left by the previous run of the process', () => {
  it('are dropped at start (the embedded store belongs to one process, so none of them is still running), but for those whose changes were written', async () => {
    const t = await createTestApp('pglite')
    try {
      const send = () => t.app.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': 'crashed-1' }, payload: server('idem-crashed') })
      // A claim as a crash leaves it (no answer stored), made a moment ago.
      await t.store.db.query(
        `INSERT INTO idempotency_keys (org_id, api_key_id, method, path, idempotency_key, fingerprint, claim_id, created_at, expires_at)
         SELECT org_id, id, 'POST', '/api/v1/assets', 'crashed-1', 'x', gen_random_uuid(), now(), now() + interval '1 day' FROM api_keys`)
      // It holds the key (with a fingerprint of no request: 422, as for another body).
      expect((await send()).statusCode).toBe(422)
      // The process starts again on the same store.
      await t.app.close()
      const again = await buildApp({ db: t.store.db, config: loadConfig({}, {}) })
      await again.ready()
      try {
        const res = await again.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': 'crashed-1' }, payload: server('idem-crashed') })
        expect(res.statusCode).toBe(201)
        // A claim whose changes were written, its answer never kept (the crash came after the commit), stays at the next start.
        const written = await again.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': 'crashed-2' }, payload: server('idem-crashed-2') })
        expect(written.statusCode).toBe(201)
        await t.store.db.query(`UPDATE idempotency_keys SET status = NULL, headers = NULL, body = NULL, created_at = now() - interval '31 seconds' WHERE idempotency_key = 'crashed-2'`)
      } finally {
        await again.close()
      }
      const third = await buildApp({ db: t.store.db, config: loadConfig({}, {}) })
      await third.ready()
      try {
        const res = await third.inject({ method: 'POST', url: '/api/v1/assets', headers: { authorization: `Bearer ${t.adminKey}`, 'idempotency-key': 'crashed-2' }, payload: server('idem-crashed-2') })
        expect([res.statusCode, res.json().errors[0].code]).toEqual([409, 'idempotency_key_in_use'])
        expect((await t.store.db.query(`SELECT count(*)::int AS n FROM assets WHERE unique_value = 'idem-crashed-2'`)).rows).toEqual([{ n: 1 }])
      } finally {
        await third.close()
      }
    } finally {
      await t.close()
    }
  })
})
