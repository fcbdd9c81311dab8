import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, withoutRequestIds, type TestApp } from '../helpers/app.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const server = (hostname: string, extra: Record<string, unknown> = {}, item: Record<string, unknown> = {}) => ({
  asset_type_key: 'server',
  name: hostname,
  properties: { hostname, environment: 'prod', cpu_count: 8, ...extra },
  ...item,
})

const DATA_TABLES = /\b(?:FROM|INTO|UPDATE)\s+(?:assets|relationships)\b/i

const invalid = (index: number, clientRef: string | null, detail: string, pointer: string, status = '422', code = 'validation_failed') => ({
  status, code, detail, source: { pointer }, meta: { index, client_ref: clientRef },
})

for (const store of STORES) {
  describe(`${store}: bulk`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const countLike = async (pattern: string): Promise<number> =>
      (await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets WHERE unique_value LIKE $1', [pattern])).rows[0]!.n
    const get = async (ref: string) => (await t.request('GET', `/api/v1/assets/${ref}`)).body.data
    const related = async (sourceId: string) =>
      (await t.store.db.query<{ target: string }>('SELECT target_asset_id AS target FROM relationships WHERE source_asset_id = $1 ORDER BY target_asset_id', [sourceId])).rows.map((r) => r.target)

    it('creates every item and answers ids with client_ref in request order (null when absent)', async () => {
      const items = [server('ok-1', {}, { client_ref: 'row-1' }), server('ok-2'), server('ok-3', { tags: ['pci'] }, { client_ref: 'row-3', access_domain_key: 'it' })]
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(res.status).toBe(201)
      expect(res.body).toEqual({
        data: [{ id: expect.stringMatching(UUID), client_ref: 'row-1' }, { id: expect.stringMatching(UUID), client_ref: null }, { id: expect.stringMatching(UUID), client_ref: 'row-3' }],
      })
      for (const [i, entry] of (res.body.data as { id: string }[]).entries()) {
        const { client_ref: _ignored, ...record } = items[i] as Record<string, unknown>
        expect(await get(entry.id)).toMatchObject({ access_domain_key: null, ...record, id: entry.id })
      }
    })

    it('lists the first 100 failures of each item, then how many more; an item of 300,000 unknown properties is one of them (it answered 500)', async () => {
      const unknown = (n: number, prefix: string) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 1]))
      const items = [
        { asset_type_key: 'note', name: 'wide', properties: unknown(300_000, 'k'), client_ref: 'wide' },
        { asset_type_key: 'note', name: 'three', properties: unknown(3, 'x') },
      ]
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect([res.status, res.body.errors.length]).toEqual([422, 104])
      const failure = (pointer: string, index: number, ref: string | null, detail: string) =>
        ({ status: '422', code: 'validation_failed', detail, source: { pointer }, meta: { index, client_ref: ref } })
      expect(res.body.errors[0]).toEqual(failure('/0/properties/k0', 0, 'wide', 'k0 is not a property of asset type note'))
      expect(res.body.errors[99]).toEqual(failure('/0/properties/k99', 0, 'wide', 'k99 is not a property of asset type note'))
      expect(res.body.errors[100]).toEqual(failure('/0', 0, 'wide', '299,900 more failures of item 0 not listed: an answer lists the first 100 of each item'))
      expect(res.body.errors.slice(101)).toEqual([0, 1, 2].map((i) => failure(`/1/properties/x${i}`, 1, null, `x${i} is not a property of asset type note`)))
      expect((await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM assets WHERE name IN ('wide', 'three')")).rows[0]!.n).toBe(0)
    })

    it('takes client_ref: null as none, as its answers show an item without one', async () => {
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: [server('null-ref-1', {}, { client_ref: null }), server('null-ref-2', {}, { client_ref: 'r2' })] })
      expect(res.status).toBe(201)
      expect(res.body.data).toEqual([{ id: expect.stringMatching(UUID), client_ref: null }, { id: expect.stringMatching(UUID), client_ref: 'r2' }])
      const bad = await t.request('POST', '/api/v1/bulk/assets', { body: [server('null-ref-3', {}, { client_ref: 7 })] })
      expect(bad.status).toBe(422)
    })

    it('refuses 10,001 items with 422 too_many_items and writes nothing', async () => {
      const items = Array.from({ length: 10_001 }, (_, i) => server(`many-${i}`))
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(res.status).toBe(422)
      expect(res.body).toEqual({
        errors: [{ status: '422', code: 'too_many_items', detail: 'a bulk request carries at most 10000 items; this one has 10001', source: { pointer: '' } }],
      })
      expect(await countLike('many-%')).toBe(0)
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', { body: Array.from({ length: 10_001 }, () => ({ id: 'x' })) })
      expect(patch.body.errors[0].code).toBe('too_many_items')
      const rels = await t.request('POST', '/api/v1/bulk/relationships', { body: Array.from({ length: 10_001 }, () => ({})) })
      expect(rels.body.errors[0].code).toBe('too_many_items')
    })

    it('answers 413 over the bulk body limit and 400 for malformed JSON, in the error envelope', async () => {
      const inject = (payload: string) => t.app.inject({
        method: 'POST', url: '/api/v1/bulk/assets', payload, headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      const tooLarge = await inject(`[${'"x",'.repeat(t.app.config.bulkBodyLimit / 4)}"x"]`)
      expect(tooLarge.statusCode).toBe(413)
      expect(withoutRequestIds(JSON.parse(tooLarge.body), tooLarge.headers['x-request-id'])).toEqual({
        errors: [{ status: '413', code: 'payload_too_large', detail: `the body is larger than ${t.app.config.bulkBodyLimit} bytes` }],
      })
      const malformed = await inject('[{"name": ')
      expect(malformed.statusCode).toBe(400)
      expect(JSON.parse(malformed.body).errors[0]).toMatchObject({ status: '400', code: 'invalid_request' })
    })

    it('names an item that is not an object, and an unknown empty member, in clear words (found by the fuzz test)', async () => {
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: [{ '': '' }, [], 7] })
      expect(res.status).toBe(400)
      expect(res.body).toEqual({
        errors: [
          { status: '400', code: 'invalid_request', detail: 'unknown field "" in item 0', source: { pointer: '/0/' }, meta: { index: 0, client_ref: null } },
          { status: '422', code: 'validation_failed', detail: 'item 1 must be an object', source: { pointer: '/1' }, meta: { index: 1, client_ref: null } },
          { status: '422', code: 'validation_failed', detail: 'item 2 must be an object', source: { pointer: '/2' }, meta: { index: 2, client_ref: null } },
        ],
      })
      const missing = await t.request('POST', '/api/v1/bulk/assets', { body: [{ name: 'no-type' }] })
      expect(missing.status).toBe(422)
      expect(missing.body.errors.map((e: { detail: string }) => e.detail)).toEqual(['item 0: asset_type_key is required'])
    })

    it('lists every failing item (start, middle, end) with index, client_ref and pointer, and writes nothing', async () => {
      const items = Array.from({ length: 21 }, (_, i) => server(`fail-${i}`, {}, { client_ref: `row-${i}` }))
      items[0] = server('fail-0', { purchased_on: '2024-01-01T00:00:00Z' }, { client_ref: 'row-0' })
      items[10] = server('fail-10', { environment: 'moon', bogus: 1 })
      items[20] = server('fail-20', { cpu_count: 'eight' }, { client_ref: 'row-20', access_domain_key: 'mars' })
      items[15] = server('fail-15', {}, { client_ref: 'row-15', access_domain_key: '' })
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(res.status).toBe(422)
      expect(res.body).toEqual({
        errors: [
          invalid(0, 'row-0', 'purchased_on must be a date YYYY-MM-DD', '/0/properties/purchased_on'),
          invalid(10, null, 'bogus is not a property of asset type server', '/10/properties/bogus'),
          invalid(10, null, 'environment must be one of dev, staging, prod', '/10/properties/environment'),
          invalid(15, 'row-15', 'access_domain_key must not be empty: null (or leaving it out) means no access domain', '/15/access_domain_key'),
          invalid(20, 'row-20', 'cpu_count must be an integer ≥ 1', '/20/properties/cpu_count'),
          invalid(20, 'row-20', 'unknown access domain mars', '/20/access_domain_key'),
        ],
      })
      expect(await countLike('fail-%')).toBe(0)
    })

    it('lists every failing item of every kind in one answer, each with its own status and code, and writes nothing', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('mix-taken')] })
      const create = await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          server('mix-a', { purchased_on: '2024-01-01T00:00:00Z' }, { client_ref: 'bad-date' }),
          server('mix-taken', {}, { client_ref: 'taken' }),
          server('mix-ok'),
          server('mix-twice', {}, { client_ref: 'first' }),
          server('mix-twice', {}, { client_ref: 'second' }),
          { asset_type_key: 'router', name: 'r', client_ref: 'unknown-type' },
        ],
      })
      expect(create.status).toBe(422)
      expect(create.body.errors.map((e: { status: string; code: string; meta: { index: number; client_ref: string | null } }) => [e.meta.index, e.meta.client_ref, e.status, e.code])).toEqual([
        [0, 'bad-date', '422', 'validation_failed'],
        [1, 'taken', '409', 'unique_violation'],
        [4, 'second', '409', 'unique_violation'],
        [5, 'unknown-type', '422', 'validation_failed'],
      ])
      expect(await countLike('mix-%')).toBe(1)
      const [app, s1] = (await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'application', name: 'mix', properties: { code: 'mix' } }, server('mix-s1')] })).body.data.map((d: { id: string }) => d.id)
      await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: s1 } })
      const rels = await t.request('POST', '/api/v1/bulk/relationships', {
        body: [
          { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: s1, client_ref: 'exists' },
          { relationship_type_key: 'depends_on', source_asset_id: s1, target_asset_id: app },
          { relationship_type_key: 'depends_on', source_asset_id: s1, target_asset_id: app, client_ref: 'again' },
          { relationship_type_key: 'runs_on', source_asset_id: s1, target_asset_id: app, client_ref: 'wrong-ends' },
        ],
      })
      expect(rels.status).toBe(422)
      expect(rels.body.errors.map((e: { code: string; meta: { index: number } }) => [e.meta.index, e.code])).toEqual([
        [0, 'duplicate_relationship'], [2, 'duplicate_relationship'], [3, 'validation_failed'], [3, 'validation_failed'],
      ])
      expect(await related(s1)).toEqual([])
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:mix-s1', properties: { hostname: 'mix-taken' }, client_ref: 'clash' },
          { id: 'server:hostname:nowhere', name: 'x' },
          { id: app, properties: { code: null } },
        ],
      })
      expect(patch.status).toBe(422)
      expect(patch.body.errors.map((e: { code: string; meta: { index: number } }) => [e.meta.index, e.code])).toEqual([
        [0, 'unique_violation'], [1, 'validation_failed'], [2, 'validation_failed'],
      ])
      expect((await get('server:hostname:mix-s1')).properties.hostname).toBe('mix-s1')
    })

    it('takes asset_type_key in a PATCH item as PATCH /assets/{id} does: the same type passes, another is 422', async () => {
      const created = await t.request('POST', '/api/v1/bulk/assets', { body: [server('typed-0')] })
      expect(created.status).toBe(201)
      const same = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:typed-0', asset_type_key: 'server', name: 'typed-0-renamed' }] })
      expect(same.status).toBe(200)
      const other = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:typed-0', asset_type_key: 'application', name: 'typed-0-again' }] })
      expect([other.status, other.body.errors]).toEqual([422, [{ status: '422', code: 'validation_failed', detail: 'asset_type_key cannot change',
        source: { pointer: '/0/asset_type_key' }, meta: { index: 0, client_ref: null } }]])
      expect((await get('server:hostname:typed-0')).name).toBe('typed-0-renamed')
    })

    it('reports schema errors per item too', async () => {
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: [server('schema-0'), { asset_type_key: 'server', client_ref: 'r1' }, server('schema-2', {}, { name: 7 })] })
      expect(res.status).toBe(422)
      expect(res.body.errors.map((e: { source: unknown; meta: unknown }) => [e.source, e.meta])).toEqual([
        [{ pointer: '/1/name' }, { index: 1, client_ref: 'r1' }],
        [{ pointer: '/2/name' }, { index: 2, client_ref: null }],
      ])
      expect(await countLike('schema-%')).toBe(0)
    })

    it('lists items that break the body schema beside items that fail later checks', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('sch-taken')] })
      const res = await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          server('sch-ok'),
          server('sch-extra', {}, { colour: 'red', client_ref: 'extra' }),
          server('sch-date', { purchased_on: '2024-13-01' }, { client_ref: 'date' }),
          server('sch-taken', {}, { client_ref: 'taken' }),
          { asset_type_key: 'server', properties: { hostname: 'sch-noname' }, client_ref: 'noname' },
        ],
      })
      expect(res.status).toBe(400)
      expect(res.body.errors.map((e: { code: string; meta: { client_ref: string } }) => [e.meta.client_ref, e.code])).toEqual([
        ['extra', 'invalid_request'], ['date', 'validation_failed'], ['taken', 'unique_violation'], ['noname', 'validation_failed'],
      ])
      expect(await countLike('sch-%')).toBe(1)
      const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'sch', properties: { code: 'sch' } } })).body.data.id
      await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: 'server:hostname:sch-taken' } })
      const rels = await t.request('POST', '/api/v1/bulk/relationships', {
        body: [
          { relationship_type_key: 'runs_on', source_asset_id: app, client_ref: 'no-target' },
          { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: 'server:hostname:sch-taken', client_ref: 'exists' },
        ],
      })
      expect(rels.status).toBe(422)
      expect(rels.body.errors.map((e: { code: string; meta: { client_ref: string } }) => [e.meta.client_ref, e.code])).toEqual([
        ['no-target', 'validation_failed'], ['exists', 'duplicate_relationship'],
      ])
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: 7, name: 'x' }, { id: 'server:hostname:nowhere' }, { id: 'server:hostname:sch-taken', name: 'renamed' }] })
      expect(patch.status).toBe(422)
      expect(patch.body.errors.map((e: { meta: { index: number } }) => e.meta.index)).toEqual([0, 1])
      expect((await get('server:hostname:sch-taken')).name).toBe('sch-taken')
    })

    it('answers null and other non-object items with 422 for those items, never 500', async () => {
      for (const [method, url] of [['POST', '/api/v1/bulk/assets'], ['PATCH', '/api/v1/bulk/assets'], ['POST', '/api/v1/bulk/relationships']] as const) {
        const res = await t.request(method, url, { body: [null, 7, 'x', []] })
        expect(res.status, `${method} ${url}`).toBe(422)
        expect(res.body.errors.map((e: { meta: { index: number } }) => e.meta.index), `${method} ${url}`).toEqual([0, 1, 2, 3])
      }
    })

    it('lists an item once, with its first failure: an invalid item is not also reported as forbidden', async () => {
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const [fin, it] = (await t.request('POST', '/api/v1/bulk/assets', {
        body: [server('once-fin', {}, { access_domain_key: 'finance' }), server('once-it', {}, { access_domain_key: 'it' })],
      })).body.data.map((d: { id: string }) => d.id)
      const rel = await t.request('POST', '/api/v1/bulk/relationships', { key: editor, body: [{ relationship_type_key: 'nope', source_asset_id: fin, target_asset_id: it }] })
      expect(rel.body.errors.map((e: { code: string }) => e.code)).toEqual(['validation_failed'])
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', { key: editor, body: [{ id: fin, properties: { cpu_count: 0 } }] })
      expect(patch.body.errors.map((e: { code: string }) => e.code)).toEqual(['validation_failed'])
    })

    it('a failing item causes no false failure in another item\'s relationships: an asset renamed in the request is not missing', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('casc-1'), server('casc-2'), server('casc-3'), { asset_type_key: 'application', name: 'casc', properties: { code: 'casc' } }] })
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:casc-1', properties: { hostname: 'casc-new' } },
          { id: 'server:hostname:casc-2', properties: { hostname: 'casc-3' } },
          { id: 'application:code:casc', relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:casc-new' }] } } } },
        ],
      })
      expect(patch.status).toBe(409)
      expect(patch.body.errors.map((e: { meta: { index: number } }) => e.meta.index)).toEqual([1])
      const fixed = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:casc-1', properties: { hostname: 'casc-new' } },
          { id: 'application:code:casc', relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:casc-new' }] } } } },
        ],
      })
      expect(fixed.status).toBe(200)
    })

    it('PATCH applies items naming one asset in order: swapped unique values, and a later relationship set replacing an earlier one', async () => {
      const [s1, s2, s3] = (await t.request('POST', '/api/v1/bulk/assets', { body: [server('swap-1'), server('swap-2'), server('swap-3')] })).body.data.map((d: { id: string }) => d.id)
      const swap = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: s1, properties: { hostname: 'swap-2' } }, { id: s2, properties: { hostname: 'swap-1' } }] })
      expect(swap.status).toBe(200)
      expect([(await get(s1)).properties.hostname, (await get(s2)).properties.hostname]).toEqual(['swap-2', 'swap-1'])
      expect((await get('server:hostname:swap-1')).id).toBe(s2)
      // One asset named twice, a unique value passing through it to another asset.
      const through = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [{ id: s3, properties: { hostname: 'swap-t' } }, { id: s3, properties: { hostname: 'swap-3' } }, { id: s1, properties: { hostname: 'swap-t' } }, { id: s3, name: 'swap-3 again' }],
      })
      expect(through.status).toBe(200)
      expect(through.body.data.map((d: { id: string }) => d.id)).toEqual([s3, s3, s1, s3])
      expect([(await get(s1)).properties.hostname, (await get(s3)).properties.hostname, (await get(s3)).name]).toEqual(['swap-t', 'swap-3', 'swap-3 again'])
      const sets = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: s1, relationships: { outgoing: { depends_on: { related_assets: [{ id: s3 }] } } } },
          { id: s1, relationships: { outgoing: { depends_on: { related_assets: [{ id: s2 }] } } } },
        ],
      })
      expect(sets.status).toBe(200)
      expect(await related(s1)).toEqual([s2])
      const cleared = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [{ id: s1, relationships: { outgoing: { depends_on: { related_assets: [{ id: s3 }] } } } }, { id: s1, relationships: { outgoing: { depends_on: { related_assets: [] } } } }],
      })
      expect(cleared.status).toBe(200)
      expect(await related(s1)).toEqual([])
    })

    it('PATCH applies the two ends of one relationship in order: the pair given last decides whether it is there (outside audit)', async () => {
      const [a, b] = (await t.request('POST', '/api/v1/bulk/assets', { body: [server('ends-a'), server('ends-b')] })).body.data.map((d: { id: string }) => d.id)
      const outgoing = (from: string, to: string[]) => ({ id: from, relationships: { outgoing: { depends_on: { related_assets: to.map((id) => ({ id })) } } } })
      const incoming = (to: string, from: string[]) => ({ id: to, relationships: { incoming: { depends_on: { related_assets: from.map((id) => ({ id })) } } } })
      const patch = async (body: unknown[]) => {
        const res = await t.request('PATCH', '/api/v1/bulk/assets', { body })
        expect(res.status, JSON.stringify(res.body)).toBe(200)
      }
      const relationship = async () => (await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${a}&filter[target_asset_id]=${b}`)).body.data.map((r: { id: string }) => r.id)
      await patch([outgoing(a, [b]), incoming(b, [])])
      expect(await relationship()).toEqual([])
      await patch([incoming(b, []), outgoing(a, [b])])
      const [kept] = await relationship()
      expect(kept).toBeDefined()
      // Named last, an existing relationship is kept as it is: not deleted and created again.
      const before = await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE subject = $1', [`relationships/${kept}`])
      await patch([incoming(b, []), outgoing(a, [b])])
      expect(await relationship()).toEqual([kept])
      expect((await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE subject = $1', [`relationships/${kept}`])).rows).toEqual(before.rows)
      // Left out last, it goes, once.
      await patch([outgoing(a, [b]), incoming(b, [])])
      expect(await relationship()).toEqual([])
      expect((await t.store.db.query<{ type: string }>('SELECT type FROM events WHERE subject = $1 ORDER BY id', [`relationships/${kept}`])).rows.map((r) => r.type))
        .toEqual(['relationship.created', 'relationship.deleted'])
      // A relationship from an asset to itself, both of whose pairs one item gives: incoming after outgoing.
      await patch([{ id: a, relationships: { outgoing: { depends_on: { related_assets: [{ id: a }] } }, incoming: { depends_on: { related_assets: [] } } } }])
      expect((await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${a}&filter[target_asset_id]=${a}`)).body.data).toEqual([])
      await patch([incoming(a, [a])])
      expect((await t.request('GET', `/api/v1/relationships?filter[source_asset_id]=${a}&filter[target_asset_id]=${a}`)).body.data).toHaveLength(1)
    })

    it('puts a refused removal of an incoming relationship on the item that asked for it', async () => {
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const [fin, own, other] = (await t.request('POST', '/api/v1/bulk/assets', {
        body: [server('rm-fin', {}, { access_domain_key: 'finance' }), server('rm-own', {}, { access_domain_key: 'it' }), server('rm-other', {}, { access_domain_key: 'it' })],
      })).body.data.map((d: { id: string }) => d.id)
      await t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'depends_on', source_asset_id: fin, target_asset_id: own } })
      const res = await t.request('PATCH', '/api/v1/bulk/assets', {
        key: editor,
        body: [
          { id: own, relationships: { incoming: { depends_on: { related_assets: [] } } }, client_ref: 'remover' },
          { id: own, name: 'renamed', relationships: { outgoing: { depends_on: { related_assets: [{ id: other }] } } }, client_ref: 'innocent' },
        ],
      })
      expect(res.status).toBe(403)
      expect(res.body.errors).toEqual([expect.objectContaining({ source: { pointer: '/0/relationships/incoming/depends_on' }, meta: { index: 0, client_ref: 'remover' } })])
    })

    it('lists an item with an unknown member once, as 400, with the member escaped in its pointer', async () => {
      const res = await t.request('POST', '/api/v1/bulk/relationships', { body: [{ 'a/b': 1 }] })
      expect(res.status).toBe(400)
      expect(res.body.errors.map((e: { code: string; source: { pointer: string } }) => [e.code, e.source.pointer])).toEqual([['invalid_request', '/0/a~1b']])
    })

    it('lists invalid and forbidden embedded relationships of different items in one answer', async () => {
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('emb-fin', {}, { access_domain_key: 'finance' })] })
      const res = await t.request('POST', '/api/v1/bulk/assets', {
        key: editor,
        body: [
          server('emb-e0', {}, { access_domain_key: 'it', client_ref: 'e0', relationships: { incoming: { depends_on: { related_assets: [{ id: 'server:hostname:emb-fin' }] } } } }),
          server('emb-e1', {}, { access_domain_key: 'it', client_ref: 'e1', relationships: { outgoing: { depends_on: { related_assets: [{ id: 'server:hostname:missing' }] } } } }),
        ],
      })
      expect(res.status).toBe(422)
      expect(res.body.errors.map((e: { code: string; meta: { client_ref: string } }) => [e.meta.client_ref, e.code])).toEqual([['e0', 'forbidden'], ['e1', 'validation_failed']])
      expect(await countLike('emb-e%')).toBe(0)
    })

    it('answers 409 listing unique clashes inside the request and against existing data, writing nothing', async () => {
      expect((await t.request('POST', '/api/v1/assets', { body: server('taken-1') })).status).toBe(201)
      const items = [server('dup-a'), server('taken-1', {}, { client_ref: 'c1' }), server('dup-a', {}, { client_ref: 'c2' }), server('dup-b'), server('dup-b')]
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(res.status).toBe(409)
      expect(res.body).toEqual({
        errors: [
          invalid(1, 'c1', 'server taken-1: the unique value is already taken by another asset of this type', '/1/properties/hostname', '409', 'unique_violation'),
          invalid(2, 'c2', 'server dup-a: the same unique value is given by item 0', '/2/properties/hostname', '409', 'unique_violation'),
          invalid(4, null, 'server dup-b: the same unique value is given by item 3', '/4/properties/hostname', '409', 'unique_violation'),
        ],
      })
      expect(await countLike('dup-%')).toBe(0)
    })

    it('PATCH merges properties key by key on each asset, by UUID or composite key, and echoes client_ref', async () => {
      const created = (await t.request('POST', '/api/v1/bulk/assets', { body: [server('p-1', { owner: 'ann' }), server('p-2')] })).body.data
      const res = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: created[0].id, client_ref: 'a', properties: { owner: null, memory_gb: 16 } },
          { id: 'server:hostname:p-2', name: 'renamed', access_domain_key: 'it', properties: { tags: ['gdpr'] } },
        ],
      })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ data: [{ id: created[0].id, client_ref: 'a' }, { id: created[1].id, client_ref: null }] })
      expect((await get(created[0].id)).properties).toEqual({ hostname: 'p-1', environment: 'prod', cpu_count: 8, memory_gb: 16 })
      expect(await get(created[1].id)).toMatchObject({ name: 'renamed', access_domain_key: 'it', properties: { hostname: 'p-2', environment: 'prod', cpu_count: 8, tags: ['gdpr'] } })
    })

    it('PATCH applies two items naming the same asset in order', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('twice-1')] })
      const res = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [{ id: 'server:hostname:twice-1', properties: { owner: 'ann', cpu_count: 2 } }, { id: 'server:hostname:twice-1', properties: { cpu_count: 4 } }],
      })
      expect(res.status).toBe(200)
      expect((await get('server:hostname:twice-1')).properties).toEqual({ hostname: 'twice-1', environment: 'prod', cpu_count: 4, owner: 'ann' })
    })

    it('PATCH takes 100 items naming one asset, each with its event, and refuses the 101st (10,000 held its lock 66–97 s)', async () => {
      const created = await t.request('POST', '/api/v1/bulk/assets', { body: [server('often-1')] })
      const id = created.body.data[0].id
      const items = (n: number) => Array.from({ length: n }, (_, i) => ({ id: 'server:hostname:often-1', properties: { cpu_count: i + 1 } }))
      const over = await t.request('PATCH', '/api/v1/bulk/assets', { body: items(101) })
      expect([over.status, over.body.errors]).toEqual([422, [{ status: '422', code: 'validation_failed', source: { pointer: '/100/id' }, meta: { index: 100, client_ref: null },
        detail: 'asset server:hostname:often-1 is named by more than 100 items of this request; send its changes in fewer items' }]])
      expect((await get(id)).properties.cpu_count).toBe(8)
      const ok = await t.request('PATCH', '/api/v1/bulk/assets', { body: items(100) })
      expect(ok.status).toBe(200)
      expect((await get(id)).properties.cpu_count).toBe(100)
      await t.app.events.flush()
      const history = await t.request('GET', `/api/v1/assets/${id}/history?page[size]=100`)
      expect(history.body.meta.page.total_items).toBe(101)
    })

    it('PATCH lists unknown assets and invalid changes in one 422 and changes nothing', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('pv-1'), server('pv-2')] })
      const res = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:pv-1', name: 'changed' },
          { id: 'server:hostname:nope', client_ref: 'x' },
          { id: 'server:hostname:pv-2', properties: { hostname: null } },
          { id: '0190b3b0-0000-7000-8000-000000000000' },
        ],
      })
      expect(res.status).toBe(422)
      expect(res.body).toEqual({
        errors: [
          invalid(1, 'x', 'asset server:hostname:nope not found', '/1/id'),
          invalid(2, null, 'hostname is required for asset type server', '/2/properties/hostname'),
          invalid(3, null, 'asset 0190b3b0-0000-7000-8000-000000000000 not found', '/3/id'),
        ],
      })
      expect((await get('server:hostname:pv-1')).name).toBe('pv-1')
    })

    it('PATCH answers 409 for a new unique value taken by another asset or given twice', async () => {
      await t.request('POST', '/api/v1/bulk/assets', { body: [server('u-1'), server('u-2'), server('u-3'), server('u-4')] })
      const res = await t.request('PATCH', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:u-1', properties: { hostname: 'u-2' } },
          { id: 'server:hostname:u-3', properties: { hostname: 'u-new' } },
          { id: 'server:hostname:u-4', client_ref: 'r', properties: { hostname: 'u-new' } },
        ],
      })
      expect(res.status).toBe(409)
      expect(res.body).toEqual({
        errors: [
          invalid(0, null, 'server u-2: the unique value is already taken by another asset of this type', '/0/properties/hostname', '409', 'unique_violation'),
          invalid(2, 'r', 'server u-new: the same unique value is given by item 1', '/2/properties/hostname', '409', 'unique_violation'),
        ],
      })
      expect(await get('server:hostname:u-1')).toBeDefined()
    })

    it('applies the key\'s roles per item: hidden assets are not found, forbidden items fail the request with 403', async () => {
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      await t.request('POST', '/api/v1/bulk/assets', {
        body: [server('acl-it', {}, { access_domain_key: 'it' }), server('acl-fin', {}, { access_domain_key: 'finance' }), server('acl-none')],
      })
      const hidden = await t.request('PATCH', '/api/v1/bulk/assets', {
        key: editor,
        body: [{ id: 'server:hostname:acl-it', name: 'x' }, { id: 'server:hostname:acl-fin', name: 'x' }, { id: 'server:hostname:acl-none', name: 'x' }],
      })
      // Both failing items are listed, each with its own status; the answer takes the 422.
      expect(hidden.status).toBe(422)
      expect(hidden.body).toEqual({ errors: [
        invalid(1, null, "the key's roles do not allow to change server assets in access domain finance", '/1', '403', 'forbidden'),
        invalid(2, null, 'asset server:hostname:acl-none not found', '/2/id'),
      ] })
      const forbidden = await t.request('PATCH', '/api/v1/bulk/assets', { key: editor, body: [{ id: 'server:hostname:acl-it', name: 'x' }, { id: 'server:hostname:acl-fin', name: 'x' }] })
      expect(forbidden.status).toBe(403)
      expect(forbidden.body).toEqual({
        errors: [invalid(1, null, "the key's roles do not allow to change server assets in access domain finance", '/1', '403', 'forbidden')],
      })
      const move = await t.request('PATCH', '/api/v1/bulk/assets', { key: editor, body: [{ id: 'server:hostname:acl-it', client_ref: 'm', access_domain_key: 'finance' }] })
      expect(move.status).toBe(403)
      expect(move.body).toEqual({
        errors: [invalid(0, 'm', 'moving an asset to another access domain needs edit_access_domain on both domains', '/0/access_domain_key', '403', 'forbidden')],
      })
      const create = await t.request('POST', '/api/v1/bulk/assets', { key: editor, body: [server('acl-2', {}, { access_domain_key: 'it' }), server('acl-3', {}, { client_ref: 'c' })] })
      expect(create.status).toBe(403)
      expect(create.body).toEqual({ errors: [invalid(1, 'c', "the key's roles do not allow to create server assets in no access domain", '/1', '403', 'forbidden')] })
      expect((await get('server:hostname:acl-it')).name).toBe('acl-it')
      const viewer = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer', roles: ['all'] })
      expect((await t.request('POST', '/api/v1/bulk/assets', { key: viewer, body: [server('acl-4')] })).status).toBe(403)
    })

    it('creates embedded relationships, naming assets created by other items of the same request', async () => {
      const res = await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          { asset_type_key: 'application', name: 'crm', properties: { code: 'crm' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:emb-1' }, { id: 'server:hostname:emb-2' }] } } } },
          server('emb-1'),
          server('emb-2'),
        ],
      })
      expect(res.status).toBe(201)
      const [app, s1, s2] = res.body.data.map((d: { id: string }) => d.id)
      expect(await related(app)).toEqual([s1, s2].sort())
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: 'application:code:crm', relationships: { outgoing: { runs_on: { related_assets: [{ id: s2 }] } } } }] })
      expect(patch.status).toBe(200)
      expect(await related(app)).toEqual([s2])
      const bad = await t.request('POST', '/api/v1/bulk/assets', {
        body: [server('emb-3'), { asset_type_key: 'application', name: 'erp', client_ref: 'e', properties: { code: 'erp' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:nowhere' }] } } } }],
      })
      expect(bad.status).toBe(422)
      expect(bad.body).toEqual({ errors: [invalid(1, 'e', 'related asset server:hostname:nowhere not found', '/1/relationships/outgoing/runs_on/related_assets/0/id')] })
      expect(await countLike('emb-3')).toBe(0)
    })

    it('creates relationships in bulk by UUID or composite key, listing every invalid or duplicate item', async () => {
      const [app, s1, s2] = (await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'application', name: 'hr', properties: { code: 'hr' } }, server('rel-1'), server('rel-2')] })).body.data.map((d: { id: string }) => d.id)
      const res = await t.request('POST', '/api/v1/bulk/relationships', {
        body: [
          { relationship_type_key: 'runs_on', source_asset_id: 'application:code:hr', target_asset_id: 'server:hostname:rel-1', client_ref: 'a' },
          { relationship_type_key: 'depends_on', source_asset_id: s1, target_asset_id: s2 },
        ],
      })
      expect(res.status).toBe(201)
      expect(res.body).toEqual({ data: [{ id: expect.stringMatching(UUID), client_ref: 'a' }, { id: expect.stringMatching(UUID), client_ref: null }] })
      expect(await related(app)).toEqual([s1])
      const dup = await t.request('POST', '/api/v1/bulk/relationships', {
        body: [
          { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: s2 },
          { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: s1, client_ref: 'old' },
          { relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: 'server:hostname:rel-2' },
        ],
      })
      expect(dup.status).toBe(409)
      expect(dup.body).toEqual({
        errors: [
          invalid(1, 'old', 'a runs_on relationship between these assets exists already', '/1', '409', 'duplicate_relationship'),
          invalid(2, null, 'the same runs_on relationship is given by item 0', '/2', '409', 'duplicate_relationship'),
        ],
      })
      const unknown = await t.request('POST', '/api/v1/bulk/relationships', {
        body: [{ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: 'server:hostname:none', client_ref: 'n' }],
      })
      expect(unknown.status).toBe(422)
      expect(unknown.body).toEqual({ errors: [invalid(0, 'n', 'target asset server:hostname:none not found', '/0/target_asset_id')] })
      expect(await related(app)).toEqual([s1])
    })

    it('runs a handful of statements whatever the item count', async () => {
      const counted = async (method: string, url: string, body: unknown): Promise<{ count: number; ids: string[] }> => {
        let count = 0
        // Only statements on the data tables: key look-ups, metamodel loads and the periodic
        // last_used_at flush happen beside requests, whatever their size.
        t.store.db.onQuery = (sql) => void (DATA_TABLES.test(sql) && count++)
        const res = await t.request(method, url, { body })
        t.store.db.onQuery = null
        expect(res.status).toBeLessThan(300)
        return { count, ids: res.body.data.map((d: { id: string }) => d.id) }
      }
      const statements = async (n: number, prefix: string): Promise<number[]> => {
        const hostnames = Array.from({ length: n }, (_, i) => `${prefix}-${i}`)
        const app = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: prefix, properties: { code: prefix } } })).body.data.id
        const created = await counted('POST', '/api/v1/bulk/assets', hostnames.map((h) => server(h)))
        const byKey = hostnames.map((h) => ({ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: `server:hostname:${h}` }))
        const byId = created.ids.map((id) => ({ relationship_type_key: 'depends_on', source_asset_id: id, target_asset_id: app }))
        return [
          created.count,
          (await counted('PATCH', '/api/v1/bulk/assets', hostnames.map((h) => ({ id: `server:hostname:${h}`, properties: { owner: 'x' } })))).count,
          (await counted('POST', '/api/v1/bulk/relationships', byKey)).count,
          (await counted('POST', '/api/v1/bulk/relationships', byId)).count,
        ]
      }
      // POST assets: one INSERT. PATCH: one SELECT … FOR UPDATE, one UPDATE. Relationships: one
      // INSERT that checks both ends itself, after one look-up of the composite keys if any, and
      // on PostgreSQL one more that confirms no end was archived meanwhile (confirmEndsLive).
      const confirm = store === 'postgres' ? 1 : 0
      expect(await statements(5, 'sc-a')).toEqual([1, 2, 2 + confirm, 1 + confirm])
      expect(await statements(500, 'sc-b')).toEqual([1, 2, 2 + confirm, 1 + confirm])
    })

    it('loses no update when overlapping bulk PATCHes run concurrently', async () => {
      const hostnames = Array.from({ length: 40 }, (_, i) => `cc-${i}`)
      await t.request('POST', '/api/v1/bulk/assets', { body: hostnames.map((h) => server(h)) })
      const keys = ['owner', 'notes', 'summary', 'memory_gb', 'uptime', 'rating'] as const
      const value = (k: string) => (k === 'memory_gb' || k === 'uptime' ? 50 : k === 'rating' ? 3 : `by ${k}`)
      const orders = keys.map((_, r) => (r % 2 === 0 ? hostnames : [...hostnames].reverse()).slice(r % 3))
      const results = await Promise.all(keys.map((k, r) =>
        t.request('PATCH', '/api/v1/bulk/assets', { body: orders[r]!.map((h) => ({ id: `server:hostname:${h}`, properties: { [k]: value(k) } })) })))
      expect(results.map((r) => r.status)).toEqual(keys.map(() => 200))
      for (const h of hostnames) {
        const expected = Object.fromEntries(keys.filter((_, r) => orders[r]!.includes(h)).map((k) => [k, value(k)]))
        expect((await get(`server:hostname:${h}`)).properties).toEqual({ hostname: h, environment: 'prod', cpu_count: 8, ...expected })
      }
    })

    it('lets one of two concurrent creates claiming the same unique values in opposite orders win, the other 409', async () => {
      const hostnames = Array.from({ length: 200 }, (_, i) => `race-${i}`)
      const [a, b] = await Promise.all([
        t.request('POST', '/api/v1/bulk/assets', { body: hostnames.map((h) => server(h)) }),
        t.request('POST', '/api/v1/bulk/assets', { body: [...hostnames].reverse().map((h) => server(h)) }),
      ])
      expect([a.status, b.status].sort()).toEqual([201, 409])
      const loser = a.status === 409 ? a : b
      expect(loser.body.errors).toHaveLength(200)
      expect(loser.body.errors[0]).toMatchObject({ status: '409', code: 'unique_violation', meta: { index: 0, client_ref: null } })
      expect(await countLike('race-%')).toBe(200)
    })

    it('lets one of two concurrent bulk relationship creates naming the same pairs in opposite orders win, the other 409', async () => {
      const hostnames = Array.from({ length: 300 }, (_, i) => `rel-race-${i}`)
      const created = await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'application', name: 'race', properties: { code: 'rel-race' } }, ...hostnames.map((h) => server(h))] })
      const [app, ...servers] = created.body.data.map((d: { id: string }) => d.id)
      const items = servers.map((id: string) => ({ relationship_type_key: 'runs_on', source_asset_id: app, target_asset_id: id }))
      const [a, b] = await Promise.all([
        t.request('POST', '/api/v1/bulk/relationships', { body: items }),
        t.request('POST', '/api/v1/bulk/relationships', { body: [...items].reverse() }),
      ])
      expect([a.status, b.status].sort()).toEqual([201, 409])
      const loser = a.status === 409 ? a : b
      expect(loser.body.errors).toHaveLength(300)
      expect(loser.body.errors[0]).toMatchObject({ code: 'duplicate_relationship', meta: { index: 0 } })
      expect(await related(app)).toEqual([...servers].sort())
    })

    it('runs a bulk PATCH and a bulk relationship create over the same assets side by side, without a deadlock', async () => {
      const hostnames = Array.from({ length: 300 }, (_, i) => `lock-${i}`)
      const created = await t.request('POST', '/api/v1/bulk/assets', { body: [{ asset_type_key: 'application', name: 'lock', properties: { code: 'lock' } }, ...hostnames.map((h) => server(h))] })
      const [app, ...servers] = created.body.data.map((d: { id: string }) => d.id)
      // The PATCH locks the application first (lowest id), then the servers; the relationships
      // meet each server before the application, as their sources.
      const [patched, linked] = await Promise.all([
        t.request('PATCH', '/api/v1/bulk/assets', { body: [app, ...servers].map((id: string) => ({ id, name: `renamed-${id}` })) }),
        t.request('POST', '/api/v1/bulk/relationships', { body: servers.map((id: string) => ({ relationship_type_key: 'depends_on', source_asset_id: id, target_asset_id: app })) }),
      ])
      expect([patched.status, linked.status]).toEqual([200, 201])
      expect((await get(servers[299]!)).name).toBe(`renamed-${servers[299]}`)
      const sources = await t.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM relationships WHERE target_asset_id = $1', [app])
      expect(sources.rows[0]!.n).toBe(300)
    })

    it('creates and updates 10,000 realistic items within the bulk body limit', async () => {
      const items = Array.from({ length: 10_000 }, (_, i) => server(`big-${i}`, {
        memory_gb: 64, purchased_on: '2023-04-01', tags: ['pci', 'gdpr'], owner: 'team-platform@example.com', cost: 1234.5,
      }, { client_ref: `row-${i}`, access_domain_key: 'it' }))
      expect(Buffer.byteLength(JSON.stringify(items))).toBeLessThan(t.app.config.bulkBodyLimit / 2)
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: items })
      expect(res.status).toBe(201)
      expect(res.body.data).toHaveLength(10_000)
      expect(res.body.data[9_999].client_ref).toBe('row-9999')
      expect(await countLike('big-%')).toBe(10_000)
      const patch = await t.request('PATCH', '/api/v1/bulk/assets', { body: res.body.data.map((d: { id: string }) => ({ id: d.id, properties: { environment: 'dev', cpu_count: 2 } })) })
      expect(patch.status).toBe(200)
      expect((await get('server:hostname:big-5000')).properties).toMatchObject({ environment: 'dev', cpu_count: 2, owner: 'team-platform@example.com' })
    })
  })
}
