import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/** Hostile or malformed requests: each gets a 4xx in the CONTRACT envelope, never a 500 or SQL. */
for (const store of STORES) {
  describe(`${store}: malformed requests`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const expectClientError = (res: { status: number; body: { errors?: { status: string; code: string; detail: string }[] } }, label: string) => {
      expect(res.status, label).toBeGreaterThanOrEqual(400)
      expect(res.status, label).toBeLessThan(500)
      expect(res.body.errors?.[0]?.status, label).toBe(String(res.status))
      expect(JSON.stringify(res.body), label).not.toMatch(/SELECT|INSERT|UPDATE assets|at .*\.ts:\d+|syntax error/)
    }

    it('answers NUL characters in names, property values and keys with 400, not 500', async () => {
      const bodies: [unknown, string][] = [
        [{ asset_type_key: 'note', name: 'a\u0000b' }, '/name'],
        [{ asset_type_key: 'note', name: 'n', properties: { body: 'x\u0000y' } }, '/properties/body'],
        [{ asset_type_key: 'server', name: 'n', properties: { hostname: 'h\u0000' } }, '/properties/hostname'],
      ]
      for (const [body, pointer] of bodies) {
        const res = await t.request('POST', '/api/v1/assets', { body })
        expect(res.body).toEqual({ errors: [{ status: '400', code: 'invalid_request', detail: 'text must not contain NUL (U+0000) characters', source: { pointer } }] })
      }
    })

    it('answers values PostgreSQL cannot store (lone surrogates, numbers beyond a 64-bit float) with 400 and a pointer, writing nothing', async () => {
      const send = (method: string, url: string, raw: string) => t.app.inject({
        method: method as 'POST', url, payload: raw, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      const surrogate = 'text must be valid Unicode: a lone surrogate escape (\\ud800–\\udfff without its pair) cannot be stored'
      const range = 'number out of range: it does not fit a 64-bit float'
      const cases: [string, string, string, string, string][] = [
        ['POST', '/api/v1/assets', '{"asset_type_key":"note","name":"n","properties":{"body":"\\ud800"}}', '/properties/body', surrogate],
        ['POST', '/api/v1/assets', '{"asset_type_key":"note","name":"x\\udc00y"}', '/name', surrogate],
        ['POST', '/api/v1/assets', '{"asset_type_key":"server","name":"inf","properties":{"hostname":"inf","cpu_count":1e400}}', '/properties/cpu_count', range],
        ['POST', '/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"ok"},{"asset_type_key":"server","name":"m","properties":{"hostname":"m","memory_gb":-1e400}}]', '/1/properties/memory_gb', range],
        ['POST', '/api/v1/bulk/assets', `[{"asset_type_key":"server","name":"m","properties":{"hostname":"m","memory_gb":1${'0'.repeat(215)}e99}}]`, '/0/properties/memory_gb', range],
        // No exponent at all: 1 and 400 zeros.
        ['POST', '/api/v1/bulk/assets', `[{"asset_type_key":"server","name":"z","properties":{"hostname":"z","memory_gb":1${'0'.repeat(400)}}}]`, '/0/properties/memory_gb', range],
        // Blanks before the value, a fraction, a capital E, a signed exponent; an item of an array.
        ['POST', '/api/v1/assets', '{"asset_type_key":"server","name":"w","properties":{"hostname":"w","cost": \n\t1.5E+400}}', '/properties/cost', range],
        ['POST', '/api/v1/search/assets', '{"filter":{"field":"properties.cpu_count","operator":"in","value":[1,\r\n2e400]}}', '/filter/value/1', range],
        ['POST', '/api/v1/search/assets', `{"filter":{"field":"name","operator":"equals","value":"${'9'.repeat(400)}"}}`, '', ''],
      ]
      for (const [method, url, raw, pointer, detail] of cases) {
        const res = await send(method, url, raw)
        if (detail === '') {
          // Digits inside a string are text, not a number: the walk finds nothing to refuse.
          expect(res.statusCode, raw).toBe(200)
          continue
        }
        expect(res.statusCode, raw).toBe(400)
        expect(res.json().errors[0]).toMatchObject({ code: 'invalid_request', detail, source: { pointer } })
      }
      // Bytes that are not UTF-8 (Latin-1 `é` = E9) are refused, not stored as U+FFFD; a UTF-8
      // body that starts with a byte-order mark is read as without it.
      const notUtf8 = 'the body is not UTF-8 text: JSON is sent as UTF-8 (RFC 8259); convert it, or escape other characters as \\uXXXX'
      const latin1 = (text: string) => Buffer.from(text, 'latin1')
      for (const [url, payload] of [
        ['/api/v1/assets', latin1('{"asset_type_key":"note","name":"Café latin-1"}')],
        ['/api/v1/bulk/assets', latin1('[{"asset_type_key":"note","name":"Café latin-1"}]')],
      ] as const) {
        const res = await t.app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })
        expect(res.statusCode, url).toBe(400)
        expect(res.json().errors).toMatchObject([{ code: 'invalid_request', detail: notUtf8 }])
      }
      expect((await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name LIKE 'Caf% latin-1'")).rows[0]!.n).toBe(0)
      // A body in a content coding (compressed, or one unknown) is refused as such, not read as text.
      for (const [coding, payload] of [['gzip', gzipSync('{"asset_type_key":"note","name":"zipped"}')], ['x-foo', Buffer.from('{"asset_type_key":"note","name":"zipped"}')]] as const) {
        const res = await t.app.inject({ method: 'POST', url: '/api/v1/assets', payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json', 'content-encoding': coding } })
        expect(res.statusCode, coding).toBe(400)
        expect(res.json().errors).toMatchObject([{ code: 'invalid_request', detail: `Content-Encoding ${coding} is not supported: send the body uncompressed, without Content-Encoding` }])
      }
      expect((await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name = 'zipped'")).rows[0]!.n).toBe(0)
      const identity = await t.app.inject({ method: 'POST', url: '/api/v1/assets', payload: '{"asset_type_key":"note","name":"plain identity"}', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json', 'content-encoding': 'identity' } })
      expect(identity.statusCode).toBe(201)
      const bom = await t.app.inject({
        method: 'POST', url: '/api/v1/assets', payload: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"asset_type_key":"note","name":"Café with a BOM"}')]),
        headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      expect(bom.statusCode).toBe(201)
      expect(bom.json().data.name).toBe('Café with a BOM')
      // Paired surrogates are ordinary text (an emoji written as escapes).
      const paired = await send('POST', '/api/v1/assets', '{"asset_type_key":"note","name":"smile \\ud83d\\ude00"}')
      expect(paired.statusCode).toBe(201)
      expect(paired.json().data.name).toBe('smile \u{1F600}')
      const stored = await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name IN ('n', 'inf', 'ok', 'm')")
      expect(stored.rows[0]!.n).toBe(0)
    })

    it('keeps the error envelope for URLs the router refuses, and names and unique values within what an index holds', async () => {
      const badEscape = await t.request('GET', '/api/v1/assets/server:hostname:a%zz')
      expect(badEscape.status).toBe(400)
      expect(badEscape.body.errors[0]).toMatchObject({ status: '400', code: 'invalid_request' })
      const tooLong = await t.request('GET', `/api/v1/assets/server:hostname:${'h'.repeat(9000)}`)
      expect(tooLong.status).toBe(404)
      expect(tooLong.body.errors[0]).toMatchObject({ status: '404', code: 'not_found' })
      // 500 characters (of any script) is the longest name and unique value: both are btree-indexed.
      const cjk = Array.from({ length: 500 }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20000))).join('')
      const longest = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: cjk, properties: { hostname: `h${'x'.repeat(499)}` } } })
      expect(longest.status).toBe(201)
      const byKey = await t.request('GET', `/api/v1/assets/server:hostname:h${'x'.repeat(499)}`)
      expect(byKey.body.data.name).toBe(cjk)
      const longName = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: `${cjk}x`, properties: { hostname: 'ln' } } })
      expect([longName.status, longName.body.errors[0].source]).toEqual([422, { pointer: '/name' }])
      const longKey = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'lk', properties: { hostname: `h${'y'.repeat(500)}` } } })
      expect([longKey.status, longKey.body.errors[0].source]).toEqual([422, { pointer: '/properties/hostname' }])
    })

    it('refuses an integer a 64-bit float would round (past 2^53) with 400 and its pointer, instead of storing another number', async () => {
      const send = (url: string, raw: string) => t.app.inject({ method: 'POST', url, payload: raw, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })
      const detail = (n: string) => `the number ${n} cannot be kept exactly: integers beyond ±9007199254740991 (2^53 − 1) lose digits in a 64-bit float; no number property can hold it (a text property takes it sent as a string)`
      for (const [url, raw, n, pointer] of [
        ['/api/v1/assets', '{"asset_type_key":"server","name":"big","properties":{"hostname":"big-1","memory_gb":9007199254740993}}', '9007199254740993', '/properties/memory_gb'],
        ['/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"ok"},{"asset_type_key":"server","name":"b","properties":{"hostname":"big-2","cost":12345678901234567891}}]', '12345678901234567891', '/1/properties/cost'],
        ['/api/v1/search/assets', '{"filter":{"field":"properties.cpu_count","operator":"equals","value":-9007199254740995}}', '-9007199254740995', '/filter/value'],
        // 2^60 is a float, but kept as its shortest form, 1152921504606847000: another number.
        ['/api/v1/assets', '{"asset_type_key":"server","name":"big","properties":{"hostname":"big-4","memory_gb":1152921504606846976}}', '1152921504606846976', '/properties/memory_gb'],
      ] as const) {
        const res = await send(url, raw)
        expect(res.statusCode, raw).toBe(400)
        expect(res.json().errors, raw).toMatchObject([{ code: 'invalid_request', detail: detail(n), source: { pointer } }])
      }
      // Integers a float holds exactly are kept, however long; the same digits as text are text.
      const exact = await send('/api/v1/assets', '{"asset_type_key":"server","name":"big","properties":{"hostname":"big-3","memory_gb":9007199254740992,"owner":"9007199254740993"}}')
      expect(exact.statusCode).toBe(201)
      expect(exact.json().data.properties).toMatchObject({ memory_gb: 9007199254740992, owner: '9007199254740993' })
      // 1.2e25 written out in full, as an NDJSON export of it reads: the same number, kept.
      const full = await send('/api/v1/assets', '{"asset_type_key":"server","name":"full","properties":{"hostname":"big-5","memory_gb":12000000000000000000000000}}')
      expect(full.statusCode).toBe(201)
      expect(full.json().data.properties.memory_gb).toBe(1.2e25)
      // A list filter finds it by the digits it was sent with, as a search does (CONTRACT §3: the value read by the property's type).
      for (const digits of ['9007199254740992', '9.007199254740992e15']) {
        const found = await t.request('GET', `/api/v1/assets?filter[properties.memory_gb]=${digits}`)
        expect([found.status, found.body.data?.map((a: { name: string }) => a.name)], digits).toEqual([200, ['big']])
      }
      expect((await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE unique_value IN ('big-1', 'big-2', 'big-4')")).rows[0]!.n).toBe(0)
    })

    it('refuses year 0000 (no date in PostgreSQL) on write and in filters with a clear 4xx, never 500', async () => {
      const write = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'y0', properties: { hostname: 'y0', purchased_on: '0000-01-01' } } })
      expect(write.status).toBe(422)
      expect(write.body.errors[0].source).toEqual({ pointer: '/properties/purchased_on' })
      for (const filter of [
        { field: 'created_at', operator: 'greater_than', value: '0000-01-01' },
        { field: 'properties.purchased_on', operator: 'in', value: ['0000-01-01'] },
      ]) {
        const res = await t.request('POST', '/api/v1/search/assets', { body: { filter } })
        expect(res.status, JSON.stringify(filter)).toBe(400)
        expect(res.body.errors[0].code).toBe('invalid_filter')
      }
      const list = await t.request('GET', '/api/v1/assets?filter[properties.purchased_on]=0000-01-01')
      expect(list.status).toBe(400)
    })

    it('refuses page numbers past 2^53 in search bodies with 400 invalid_page', async () => {
      const pages = [
        ['/api/v1/search/relationships', { page: { number: 1e20 } }, '/page/number'],
        ['/api/v1/search/assets', { include: ['relationships'], relationships: { page: { number: 1e20 } } }, '/relationships/page/number'],
      ] as const
      for (const [url, body, pointer] of pages) {
        const res = await t.request('POST', url, { body })
        expect(res.status, url).toBe(400)
        expect(res.body.errors[0]).toMatchObject({ code: 'invalid_page', source: { pointer } })
      }
    })

    it('refuses unknown members of the relationships block of a search with 400', async () => {
      const res = await t.request('POST', '/api/v1/search/assets', { body: { include: ['relationships'], relationships: { limit: 1 } } })
      expect(res.status).toBe(400)
      expect(res.body.errors[0]).toMatchObject({ code: 'invalid_request', source: { pointer: '/relationships/limit' } })
      // An unknown filter field is pointed at where it is named; a bad value at the value.
      const unknown = 'unknown relationships filter field "name"; it takes relationship_type_key, direction, related_asset.asset_type_key, related_asset.name'
      for (const [filter, pointer, detail] of [
        [{ field: 'name', operator: 'equals', value: 'x' }, '/relationships/filter/field', unknown],
        [{ and: [{ field: 'direction', operator: 'equals', value: 'in' }, { field: 'name', operator: 'in', value: ['x'] }] }, '/relationships/filter/and/0/value', 'direction must be outgoing or incoming'],
        [{ and: [{ field: 'name', operator: 'in', value: ['x'] }] }, '/relationships/filter/and/0/field', unknown],
        [{ name: 'x' }, '/relationships/filter/name', unknown],
      ] as const) {
        const bad = await t.request('POST', '/api/v1/search/assets', { body: { include: ['relationships'], relationships: { filter } } })
        expect(bad.status, JSON.stringify(filter)).toBe(400)
        expect(bad.body.errors, JSON.stringify(filter)).toEqual([{ status: '400', code: 'invalid_filter', detail, source: { pointer } }])
      }
    })

    it('refuses a query parameter a write does not take with 400, writing nothing (DELETE …?dry_run=true archives nothing)', async () => {
      const note = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'query-guarded' } })).body.data
      const before = await t.store.db.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM assets')
      const events = await t.store.db.query('SELECT count(*)::int AS n FROM events')
      const cases: [string, string, unknown, string][] = [
        ['DELETE', `/api/v1/assets/${note.id}?dry_run=true`, undefined, 'dry_run'],
        ['POST', '/api/v1/assets?colour=red', { asset_type_key: 'note', name: 'q1' }, 'colour'],
        ['PATCH', `/api/v1/assets/${note.id}?dryrun=true`, { name: 'renamed' }, 'dryrun'],
        ['PUT', '/api/v1/assets/server:hostname:q2?merge=true&x=1', { name: 'q2' }, 'x'],
        ['POST', '/api/v1/bulk/assets?dry-run=true', [{ asset_type_key: 'note', name: 'q3' }], 'dry-run'],
        ['PATCH', '/api/v1/bulk/assets?foo=1', [{ id: note.id, name: 'renamed' }], 'foo'],
        ['PUT', '/api/v1/bulk/assets?foo=1', [{ id: 'server:hostname:q4', name: 'q4' }], 'foo'],
        ['POST', '/api/v1/relationships?foo=1', { relationship_type_key: 'runs_on', source_asset_id: note.id, target_asset_id: note.id }, 'foo'],
        ['POST', '/api/v1/search/assets?limit=10', {}, 'limit'],
        ['POST', '/api/v1/analytics/assets?foo=1', {}, 'foo'],
        // Whatever the body (outside audit: without one, or with one the route refuses itself, the
        // query string went unchecked and analytics counted every asset).
        ['POST', '/api/v1/analytics/assets?foo=1', undefined, 'foo'],
        ['POST', '/api/v1/analytics/assets?filter[asset_type_key]=server', undefined, 'filter[asset_type_key]'],
        ['POST', '/api/v1/analytics/assets?foo=1', { measures: 'count' }, 'foo'],
        ['POST', '/api/v1/bulk/assets?dry-run=true', [{ name: 1 }], 'dry-run'],
        ['GET', '/api/v1/metamodel/asset-types/note?expand=x', undefined, 'expand'],
      ]
      for (const [method, url, body, parameter] of cases) {
        const res = await t.request(method, url, { body })
        expect(res.status, `${method} ${url}`).toBe(400)
        expect(res.body.errors, `${method} ${url}`).toEqual([{ status: '400', code: 'invalid_request', detail: `unknown query parameter ${parameter}`, source: { parameter } }])
      }
      expect((await t.store.db.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM assets')).rows).toEqual(before.rows)
      expect((await t.store.db.query('SELECT count(*)::int AS n FROM events')).rows).toEqual(events.rows)
      expect((await t.request('GET', `/api/v1/assets/${note.id}`)).body.data.name).toBe('query-guarded')
    })

    it('lists every item of a bulk body that holds values the store cannot keep, each with its index and client_ref (CONTRACT §5)', async () => {
      const send = (method: 'POST' | 'PATCH', url: string, raw: string) => t.app.inject({
        method, url, payload: raw, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      const nul = 'text must not contain NUL (U+0000) characters'
      const range = 'number out of range: it does not fit a 64-bit float'
      const inexact = 'the number 9007199254740993 cannot be kept exactly: integers beyond ±9007199254740991 (2^53 − 1) lose digits in a 64-bit float; no number property can hold it (a text property takes it sent as a string)'
      const poison = 'keys named "__proto__" (or "constructor" holding "prototype") are not accepted'
      const entry = (detail: string, pointer: string, index: number, ref: string | null) => ({ status: '400', code: 'invalid_request', detail, source: { pointer }, meta: { index, client_ref: ref } })
      const created = await send('POST', '/api/v1/bulk/assets',
        '[{"client_ref":"a","asset_type_key":"note","name":"n\\u0000a"},{"asset_type_key":"note","name":"fine"},' +
        '{"client_ref":"c","asset_type_key":"server","name":"c","properties":{"hostname":"c\\u0000","memory_gb":1e400}},' +
        '{"client_ref":"d","asset_type_key":"server","name":"d","properties":{"hostname":"d","cpu_count":9007199254740993}}]')
      expect(created.statusCode).toBe(400)
      expect(created.json().errors.map(({ meta: { request_id: _, ...meta }, ...rest }: any) => ({ ...rest, meta }))).toEqual([
        entry(nul, '/0/name', 0, 'a'),
        entry(nul, '/2/properties/hostname', 2, 'c'),
        entry(range, '/2/properties/memory_gb', 2, 'c'),
        entry(inexact, '/3/properties/cpu_count', 3, 'd'),
      ])
      const patched = await send('PATCH', '/api/v1/bulk/assets', '[{"id":"note:x","client_ref":"p","name":"x\\u0000"},{"id":"note:y","name":"\\ud800"}]')
      expect(patched.json().errors).toMatchObject([
        { detail: nul, source: { pointer: '/0/name' }, meta: { index: 0, client_ref: 'p' } },
        { source: { pointer: '/1/name' }, meta: { index: 1, client_ref: null } },
      ])
      const poisoned = await send('POST', '/api/v1/bulk/assets', '[{"client_ref":"a","asset_type_key":"note","name":"a","__proto__":{}},{"asset_type_key":"note","name":"b"},{"client_ref":"c","asset_type_key":"note","name":"c","properties":{"constructor":{"prototype":{}}}}]')
      expect(poisoned.statusCode).toBe(400)
      expect(poisoned.json().errors).toMatchObject([
        { detail: poison, source: { pointer: '/0/__proto__' }, meta: { index: 0, client_ref: 'a' } },
        { detail: poison, source: { pointer: '/2/properties/constructor' }, meta: { index: 2, client_ref: 'c' } },
      ])
      expect(poisoned.json().errors).toHaveLength(2)
      expect((await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name IN ('fine', 'b')")).rows[0]!.n).toBe(0)
    })

    it('lists items holding values the store cannot keep together with the other failing items of the body, of every kind (CONTRACT §1)', async () => {
      const send = (method: 'POST' | 'PATCH' | 'PUT', url: string, raw: string, headers: Record<string, string> = {}) => t.app.inject({
        method, url, payload: raw, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json', ...headers },
      })
      const nul = 'text must not contain NUL (U+0000) characters'
      const poison = 'keys named "__proto__" (or "constructor" holding "prototype") are not accepted'
      const failures = (res: { json: () => any }) => res.json().errors.map((e: any) => [e.status, e.code, e.source.pointer, e.meta.index, e.meta.client_ref])
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'taken', properties: { hostname: 'mixed-taken' } } })
      const before = await t.store.db.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM assets')

      const created = await send('POST', '/api/v1/bulk/assets', JSON.stringify([
        { client_ref: 'nul', asset_type_key: 'note', name: 'a\u0000' },
        { client_ref: 'unknown', asset_type_key: 'note', name: 'b', colour: 'red' },
        { client_ref: 'type', asset_type_key: 'server', name: 'c', properties: { hostname: 'mixed-c', cpu_count: 'many' } },
        { client_ref: 'fine', asset_type_key: 'note', name: 'fine-mixed' },
        { client_ref: 'unique', asset_type_key: 'server', name: 'e', properties: { hostname: 'mixed-taken' } },
      ]))
      expect(created.statusCode).toBe(400)
      expect(failures(created)).toEqual([
        ['400', 'invalid_request', '/0/name', 0, 'nul'],
        ['400', 'invalid_request', '/1/colour', 1, 'unknown'],
        ['422', 'validation_failed', '/2/properties/cpu_count', 2, 'type'],
        ['409', 'unique_violation', '/4/properties/hostname', 4, 'unique'],
      ])
      expect(created.json().errors[0].detail).toBe(nul)

      // A poisoned item and an unstorable one in one body, beside an item of another kind.
      const poisoned = await send('POST', '/api/v1/bulk/assets',
        '[{"client_ref":"p","asset_type_key":"note","name":"p","__proto__":{}},{"client_ref":"s","asset_type_key":"note","name":"\\ud800"},{"client_ref":"t","asset_type_key":"server","name":"t","properties":{"hostname":"mixed-t","cpu_count":"x"}}]')
      expect(failures(poisoned)).toEqual([
        ['400', 'invalid_request', '/0/__proto__', 0, 'p'],
        ['400', 'invalid_request', '/1/name', 1, 's'],
        ['422', 'validation_failed', '/2/properties/cpu_count', 2, 't'],
      ])
      expect(poisoned.json().errors[0].detail).toBe(poison)

      const upserted = await send('PUT', '/api/v1/bulk/assets',
        '[{"id":"server:hostname:mixed-u","name":"u\\u0000","properties":{"hostname":"mixed-u"}},{"id":"server:hostname:mixed-v","name":"v","properties":{"hostname":"mixed-v","cpu_count":-1}}]')
      expect(failures(upserted)).toEqual([
        ['400', 'invalid_request', '/0/name', 0, null],
        ['422', 'validation_failed', '/1/properties/cpu_count', 1, null],
      ])
      const patched = await send('PATCH', '/api/v1/bulk/assets', '[{"id":"server:hostname:mixed-taken","name":"\\udc00"},{"id":"server:hostname:nowhere","name":"w"}]')
      expect(failures(patched)).toEqual([
        ['400', 'invalid_request', '/0/name', 0, null],
        ['422', 'validation_failed', '/1/id', 1, null],
      ])
      const related = await send('POST', '/api/v1/bulk/relationships', '[{"relationship_type_key":"runs_on\\u0000","source_asset_id":"a","target_asset_id":"b","client_ref":"r"},{"relationship_type_key":"nope","source_asset_id":"server:hostname:mixed-taken","target_asset_id":"server:hostname:mixed-taken"}]')
      expect(failures(related)[0]).toEqual(['400', 'invalid_request', '/0/relationship_type_key', 0, 'r'])
      expect(failures(related).slice(1).every((f: unknown[]) => f[3] === 1)).toBe(true)
      expect(failures(related).length).toBeGreaterThan(1)

      // The items set aside are part of what makes a request the same for its Idempotency-Key.
      const key = { 'idempotency-key': 'mixed-set-aside' }
      const first = await send('POST', '/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"x\\u0000"},{"asset_type_key":"note","name":"ok"}]', key)
      const again = await send('POST', '/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"x\\u0000"},{"asset_type_key":"note","name":"ok"}]', key)
      const other = await send('POST', '/api/v1/bulk/assets', '[{"asset_type_key":"note","name":"y\\u0000"},{"asset_type_key":"note","name":"ok"}]', key)
      expect([first.statusCode, again.statusCode, again.headers['idempotent-replayed'], other.statusCode, other.json().errors[0].code]).toEqual([400, 400, 'true', 422, 'idempotency_key_reused'])
      expect(again.body).toBe(first.body)

      expect((await t.store.db.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM assets')).rows).toEqual(before.rows)
    })

    it('archives with an empty text/plain body (a body-less DELETE some clients label so), and names a poisoned body for what it is', async () => {
      const note = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'plain-delete' } })).body.data.id
      const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/assets/${note}`, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'text/plain' } })
      expect(del.statusCode).toBe(204)
      const poisoned = await t.app.inject({
        method: 'POST', url: '/api/v1/assets', payload: '{"asset_type_key":"note","name":"p","__proto__":{"x":1}}',
        headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      expect(poisoned.statusCode).toBe(400)
      expect(poisoned.json().errors).toMatchObject([{ detail: 'keys named "__proto__" (or "constructor" holding "prototype") are not accepted', source: { pointer: '/__proto__' } }])
      const page = await t.request('POST', '/api/v1/search/assets', { body: { include: ['relationships'], relationships: { page: { number: 1, x: 2 } } } })
      expect(page.status).toBe(400)
      expect(page.body.errors[0]).toMatchObject({ code: 'invalid_page', source: { pointer: '/relationships/page/x' } })
    })

    it('refuses a Viewer key with 403 before looking at the body', async () => {
      const viewer = await t.givenKey({ type: 'Viewer' })
      for (const [method, url, body] of [
        ['POST', '/api/v1/assets', {}], ['POST', '/api/v1/relationships', {}], ['POST', '/api/v1/bulk/relationships', [{}]],
        ['POST', '/api/v1/bulk/assets', [{}]], ['PATCH', '/api/v1/bulk/assets', Array.from({ length: 10_001 }, () => ({}))],
      ] as const) {
        const res = await t.request(method, url, { key: viewer, body })
        expect(res.status, `${method} ${url}`).toBe(403)
        expect(res.body.errors[0].code).toBe('forbidden')
      }
    })

    it('answers hostile asset references in paths with 404', async () => {
      for (const ref of ["server:hostname:x'--", '..%2F..%2Fetc', 'a'.repeat(400), 'server:hostname:', '::']) {
        const res = await t.request('GET', `/api/v1/assets/${ref}`)
        expect(res.status, ref).toBe(404)
        expectClientError(res, ref)
      }
      for (const ref of ['%00', 'server:hostname:%00']) {
        const res = await t.request('GET', `/api/v1/assets/${ref}`)
        expect(res.status, ref).toBe(400)
        expectClientError(res, ref)
        expect(res.body.errors[0].source, ref).toBeUndefined()
      }
    })

    it('names the query parameter whose value holds a NUL', async () => {
      for (const [query, parameter] of [['filter[name]=%00', 'filter[name]'], ['sort=name&filter%5Bname%5D=a%00b', 'filter[name]'], ['page[size]=1&include=%00', 'include']] as const) {
        const res = await t.request('GET', `/api/v1/assets?${query}`)
        expect(res.body.errors, query).toEqual([{ status: '400', code: 'invalid_request', detail: 'text must not contain NUL (U+0000) characters', source: { parameter } }])
      }
    })

    it('refuses a query string whose escapes are not UTF-8 with 400, naming the parameter, instead of reading another value', async () => {
      const detail = 'the query string is malformed: each % must start an escape of UTF-8 (%XX, two hex digits); write a literal % as %25'
      for (const [query, parameter] of [['filter[name]=%ZZ', 'filter[name]'], ['filter[name]=%FF', 'filter[name]'], ['sort=name&filter[name]=%E2%82', 'filter[name]'],
        ['filter%5Bname%5D=a%', 'filter[name]'], ['page[size]=%', 'page[size]']] as const) {
        const res = await t.request('GET', `/api/v1/assets?${query}`)
        expect(res.status, query).toBe(400)
        expect(res.body.errors, query).toMatchObject([{ status: '400', code: 'invalid_request', detail, source: { parameter } }])
      }
      const unnamed = await t.request('GET', '/api/v1/assets?filter[na%ZZme]=x')
      expect(unnamed.body.errors).toMatchObject([{ code: 'invalid_request', detail }])
      expect(unnamed.body.errors[0].source).toBeUndefined()
      // Escapes of UTF-8, a literal % written %25 and + for a space are read as sent.
      const named = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: '100% café' } })).body.data
      const found = await t.request('GET', '/api/v1/assets?filter[name]=100%25+caf%C3%A9')
      expect(found.status).toBe(200)
      expect(found.body.data.map((a: { id: string }) => a.id)).toEqual([named.id])
    })

    it('refuses a body that says something on a write that takes none (an unknown field, CONTRACT §1), doing nothing', async () => {
      const note = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'bodyless' } })).body.data.id
      const send = (payload: string) => t.app.inject({ method: 'DELETE', url: `/api/v1/assets/${note}`, payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })
      const unknown = await send('{"permanent": true, "x": 1}')
      expect(unknown.statusCode).toBe(400)
      expect(unknown.json().errors).toMatchObject([
        { status: '400', code: 'invalid_request', detail: 'unknown field "permanent": this request takes no body', source: { pointer: '/permanent' } },
        { status: '400', code: 'invalid_request', detail: 'unknown field "x": this request takes no body', source: { pointer: '/x' } },
      ])
      expect((await send('[1]')).json().errors).toMatchObject([{ code: 'invalid_request', detail: 'this request takes no body', source: { pointer: '' } }])
      expect((await t.request('GET', `/api/v1/assets/${note}`)).status).toBe(200)
      // No body, null and {} say nothing.
      expect((await send('{}')).statusCode).toBe(204)
      const other = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name: 'bodyless-2' } })).body.data.id
      expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/assets/${other}`, payload: 'null', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })).statusCode).toBe(204)
      // The archives' events handed over first: a webhook created before the relay's round (20 ms
      // after a commit on PGlite) is given them too, and the deliveries below would not be empty.
      await t.settled()
      const hook = (await t.request('POST', '/api/v1/webhooks', { body: { url: 'https://example.com/hook', event_types: ['*'] } })).body.data
      const test = await t.request('POST', `/api/v1/webhooks/${hook.id}/test`, { body: { event_type: 'asset.created' } })
      expect(test.status).toBe(400)
      expect((await t.request('GET', `/api/v1/webhooks/${hook.id}/deliveries`)).body.data).toEqual([])
      expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { body: { secret: 'mine' } })).status).toBe(400)
      expect((await t.request('POST', `/api/v1/webhooks/${hook.id}/test`)).status).toBe(202)
    })

    it('rejects bodies of the wrong JSON shape with 400 or 422', async () => {
      for (const payload of ['[]', '"text"', '42', 'null', '{"asset_type_key": ["server"], "name": {}}', '{"__proto__": {"x": 1}}']) {
        const res = await t.app.inject({
          method: 'POST', url: '/api/v1/assets', payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
        })
        expectClientError({ status: res.statusCode, body: JSON.parse(res.body) }, payload)
      }
      // A body that is not an object is malformed (400), the same on every route; its pointer is
      // the whole document's, "" (RFC 6901: "/" names a member called "").
      for (const [method, url] of [['POST', '/api/v1/assets'], ['PATCH', '/api/v1/assets/server:hostname:none'], ['PUT', '/api/v1/assets/server:hostname:none'],
        ['POST', '/api/v1/relationships'], ['POST', '/api/v1/search/assets'], ['POST', '/api/v1/api-keys'], ['POST', '/api/v1/webhooks']] as const) {
        // (A search's body is optional: `null` there is no body, every asset.)
        for (const payload of url.includes('/search/') ? ['[]', '"text"'] : ['[]', 'null', '"text"']) {
          const res = await t.app.inject({ method, url, payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' } })
          expect(res.statusCode, `${method} ${url} ${payload}`).toBe(400)
          expect(res.json().errors, `${method} ${url} ${payload}`).toMatchObject([{ code: 'invalid_request', detail: 'the body must be an object', source: { pointer: '' } }])
        }
      }
    })

    it('reads every body as JSON whatever its Content-Type: JSON labelled otherwise or unlabelled works, anything else is 400', async () => {
      const send = (payload: string, headers: Record<string, string>) =>
        t.app.inject({ method: 'POST', url: '/api/v1/assets', payload, headers: { authorization: `Bearer ${t.adminKey}`, ...headers } })
      for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
        const form = await send('name=x', { 'content-type': type })
        expect(form.statusCode, type).toBe(400)
        expect(form.json().errors[0]).toMatchObject({ code: 'invalid_request', detail: 'the body is not valid JSON' })
      }
      const labelled = await send('{"asset_type_key":"note","name":"labelled text/plain"}', { 'content-type': 'text/plain' })
      expect(labelled.statusCode).toBe(201)
      const unlabelled = await send('{"asset_type_key":"note","name":"unlabelled"}', {})
      expect(unlabelled.statusCode).toBe(201)
      // A header that is no media type (a fetch client that appended it twice, a bare word) is as none.
      for (const type of ['application/json, application/json', 'json', '*', '']) {
        const odd = await send(`{"asset_type_key":"note","name":"labelled ${JSON.stringify(type).slice(1, -1)}"}`, { 'content-type': type })
        expect(odd.statusCode, type).toBe(201)
      }
      const note = (await send('{"asset_type_key":"note","name":"archived with an odd label"}', {})).json().data.id
      const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/assets/${note}`, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'json', 'content-length': '0' } })
      expect(del.statusCode).toBe(204)
    })

    it('names a query parameter sent more than once as such, with the error code of its family', async () => {
      for (const [query, code, parameter] of [['page[size]=1&page[size]=2', 'invalid_page', 'page[size]'], ['sort=name&sort=-name', 'invalid_sort', 'sort'],
        ['filter[name]=a&filter[name]=b', 'invalid_filter', 'filter[name]']] as const) {
        const res = await t.request('GET', `/api/v1/assets?${query}`)
        expect(res.status, query).toBe(400)
        expect(res.body.errors, query).toEqual([expect.objectContaining({ code, detail: `${parameter} is given 2 times; send it once`, source: { parameter } })])
      }
      const dry = await t.request('POST', '/api/v1/assets?dry_run=true&dry_run=false', { body: { asset_type_key: 'note', name: 'twice' } })
      expect([dry.status, dry.body.errors[0].detail]).toEqual([400, 'dry_run is given 2 times; send it once'])
    })

    it('answers hostile filter and sort parameters with 400', async () => {
      for (const q of [
        "filter[properties.x'); DROP TABLE assets;--]=1", 'filter[name][x]=1', 'sort=name;DROP', 'sort=,,', 'filter[properties.hostname]=%00',
        'page[number]=99999999999999999999', 'filter=1',
      ]) {
        const res = await t.request('GET', `/api/v1/assets?${q}`)
        expectClientError(res, q)
      }
      expect((await t.request('GET', '/api/v1/assets')).status).toBe(200)
    })
  })
}
