import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { ACME } from '../helpers/fixtures.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

for (const store of STORES) {
  describe(`${store}: assets`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const server = (hostname: string, extra: Record<string, unknown> = {}) => ({
      asset_type_key: 'server',
      name: hostname,
      properties: { hostname, environment: 'prod', cpu_count: 8, ...extra },
    })

    it('creates an asset and answers 201 with the whole record', async () => {
      const res = await t.request('POST', '/api/v1/assets', {
        body: { ...server('web-01', { purchased_on: '2024-02-29', tags: ['pci'], managed: true }), access_domain_key: 'it' },
      })
      expect(res.status).toBe(201)
      expect(res.body).toEqual({
        data: {
          id: expect.stringMatching(UUID),
          asset_type_key: 'server',
          name: 'web-01',
          access_domain_key: 'it',
          properties: { hostname: 'web-01', environment: 'prod', cpu_count: 8, purchased_on: '2024-02-29', tags: ['pci'], managed: true },
          created_at: expect.stringMatching(TIMESTAMP),
          updated_at: expect.stringMatching(TIMESTAMP),
        },
      })
    })

    it('sets access_domain_key to null when omitted', async () => {
      const res = await t.request('POST', '/api/v1/assets', { body: server('web-02') })
      expect(res.status).toBe(201)
      expect(res.body.data.access_domain_key).toBeNull()
    })

    it('reads an asset by id and by composite key', async () => {
      const created = (await t.request('POST', '/api/v1/assets', { body: server('web-03') })).body.data
      const byId = await t.request('GET', `/api/v1/assets/${created.id}`)
      expect(byId.status).toBe(200)
      expect(byId.body).toEqual({ data: created })
      const byKey = await t.request('GET', '/api/v1/assets/server:hostname:web-03')
      expect(byKey.status).toBe(200)
      expect(byKey.body).toEqual({ data: created })
    })

    it('keeps a value that starts with a byte-order mark (U+FEFF) as written: read back, exported and compared by an upsert', async () => {
      const bom = '\ufeff'
      const created = (await t.request('POST', '/api/v1/assets', { body: { ...server('bom-01', { owner: `${bom}ops` }), name: `${bom}bom-01` } })).body.data
      expect([created.name, created.properties.owner]).toEqual([`${bom}bom-01`, `${bom}ops`])
      expect((await t.request('GET', `/api/v1/assets/${created.id}`)).body).toEqual({ data: created })
      expect((await t.request('GET', '/api/v1/assets/server:hostname:bom-01')).body).toEqual({ data: created })
      expect((await t.request('GET', '/api/v1/assets?filter[name]=%EF%BB%BFbom-01')).body.data).toEqual([created])
      const csv = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?format=csv&filter[asset_type_key]=server&filter[properties.hostname]=bom-01', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(csv.statusCode, csv.body).toBe(200)
      expect(csv.body.split(/\r?\n/)[1]).toContain(`,${bom}bom-01,`)
      // The name without the mark is another name: the upsert changes it.
      const put = await t.request('PUT', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:bom-01', name: 'bom-01', properties: created.properties }] })
      expect(put.body.data).toEqual([{ id: created.id, client_ref: null, result: 'updated' }])
      expect((await t.request('GET', `/api/v1/assets/${created.id}`)).body.data.name).toBe('bom-01')
    })

    it('answers 404 for unknown ids, unknown composite keys and types without a unique key', async () => {
      for (const ref of ['0190b3b0-0000-7000-8000-000000000000', 'server:hostname:nope', 'server:owner:x', 'note:body:x', 'nothing', 'a:b:c:d']) {
        const res = await t.request('GET', `/api/v1/assets/${encodeURIComponent(ref)}`)
        expect(res.status, ref).toBe(404)
        expect(res.body.errors[0]).toMatchObject({ status: '404', code: 'not_found' })
      }
    })

    it('rejects a full timestamp in a date property with 422 and a pointer', async () => {
      const res = await t.request('POST', '/api/v1/assets', { body: server('bad-date', { purchased_on: '2024-01-01T00:00:00Z' }) })
      expect(res.status).toBe(422)
      expect(res.body).toEqual({
        errors: [{ status: '422', code: 'validation_failed', detail: 'purchased_on must be a date YYYY-MM-DD', source: { pointer: '/properties/purchased_on' } }],
      })
    })

    it('lists every property error at once: unknown key, wrong type, unknown option, missing required', async () => {
      const res = await t.request('POST', '/api/v1/assets', {
        body: { asset_type_key: 'server', name: 'x', properties: { bogus: 1, cpu_count: 'eight', environment: 'moon', tags: ['pci', 'nope'], purchased_on: '2023-02-30' } },
      })
      expect(res.status).toBe(422)
      const pointers = res.body.errors.map((e: { source: { pointer: string } }) => e.source.pointer).sort()
      expect(pointers).toEqual([
        '/properties/bogus', '/properties/cpu_count', '/properties/environment', '/properties/hostname', '/properties/purchased_on', '/properties/tags',
      ])
      expect(res.body.errors.find((e: { source: { pointer: string } }) => e.source.pointer === '/properties/hostname').detail).toBe('hostname is required for asset type server')
      expect(res.body.errors.find((e: { source: { pointer: string } }) => e.source.pointer === '/properties/environment').detail).toBe('environment must be one of dev, staging, prod')
    })

    it('validates every property type', async () => {
      const cases: [string, unknown, boolean][] = [
        ['cost', 12.5, true], ['cost', '12', false], ['price', 12.5, true], ['price', '12', false],
        ['uptime', 99.9, true], ['uptime', 101, false],
        ['rating', 5, true], ['rating', 6, false], ['rating', 2.5, false],
        ['homepage', 'https://example.com/x', true], ['homepage', 'not a url', false],
        ['notes', 'long text', true], ['summary', '<p>rich</p>', true], ['summary', 3, false],
        ['managed', false, true], ['managed', 'yes', false],
        ['cpu_count', 0, false], ['cpu_count', 1.5, false], ['memory_gb', 1.5, true],
        ['tags', ['pci', 'pci'], false], ['tags', [], true],
      ]
      let n = 0
      for (const [key, value, ok] of cases) {
        const res = await t.request('POST', '/api/v1/assets', { body: server(`types-${n++}`, { [key]: value }) })
        expect(res.status, `${key}=${JSON.stringify(value)}`).toBe(ok ? 201 : 422)
      }
    })

    it('enforces unique_key characters and uniqueness among live assets', async () => {
      // Every Unicode white space, U+0085 (NEXT LINE) too, which JavaScript's \s leaves out.
      const spaces = ['\t', '\n', '\v', '\f', '\r', '\u0085', '\u00a0', '\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000']
      for (const bad of ['a b', 'a/b', 'a:b', "a'b", 'a#b', '', ...spaces.map((space) => `a${space}b`)]) {
        const res = await t.request('POST', '/api/v1/assets', { body: server(bad || 'empty', { hostname: bad }) })
        expect(res.status, bad).toBe(422)
      }
      expect((await t.request('POST', '/api/v1/assets', { body: server('dup-1') })).status).toBe(201)
      const clash = await t.request('POST', '/api/v1/assets', { body: server('dup-1') })
      expect(clash.status).toBe(409)
      expect(clash.body.errors[0]).toMatchObject({ status: '409', code: 'unique_violation' })
    })

    it('frees a unique value when its asset is archived', async () => {
      const first = (await t.request('POST', '/api/v1/assets', { body: server('reuse-1') })).body.data
      expect((await t.request('DELETE', `/api/v1/assets/${first.id}`)).status).toBe(204)
      expect((await t.request('POST', '/api/v1/assets', { body: server('reuse-1') })).status).toBe(201)
    })

    it('archives: the asset disappears from reads, and PATCH/DELETE answer 404', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('gone-1') })).body.data
      const del = await t.request('DELETE', '/api/v1/assets/server:hostname:gone-1')
      expect(del.status).toBe(204)
      expect(del.body).toBeNull()
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).status).toBe(404)
      expect((await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'x' } })).status).toBe(404)
      expect((await t.request('DELETE', `/api/v1/assets/${a.id}`)).status).toBe(404)
      const list = await t.request('GET', '/api/v1/assets?filter[name]=gone-1')
      expect(list.body.data).toEqual([])
      const row = await t.store.db.query<{ archived: boolean }>('SELECT archived_at IS NOT NULL AS archived FROM assets WHERE id = $1', [a.id])
      expect(row.rows).toEqual([{ archived: true }])
    })

    it('PATCH merges properties key by key and null clears a key', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('patch-1', { owner: 'ann', memory_gb: 16 }) })).body.data
      const res = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'patched', properties: { owner: null, cpu_count: 32 } } })
      expect(res.status).toBe(200)
      expect(res.body.data).toEqual({
        ...a,
        name: 'patched',
        properties: { hostname: 'patch-1', environment: 'prod', cpu_count: 32, memory_gb: 16 },
        updated_at: expect.stringMatching(TIMESTAMP),
      })
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).body.data).toEqual(res.body.data)
    })

    it('PATCH refuses to change asset_type_key (422) and to clear a required property (422), changing nothing', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('patch-2') })).body.data
      const typeChange = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { asset_type_key: 'application' } })
      expect(typeChange.status).toBe(422)
      expect(typeChange.body.errors[0]).toMatchObject({ code: 'validation_failed', source: { pointer: '/asset_type_key' } })
      const clear = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'changed', properties: { hostname: null } } })
      expect(clear.status).toBe(422)
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).body.data).toEqual(a)
    })

    it('refuses an empty value ("" or []) of a required property, as a missing one, on create, PATCH and PUT; white space is a value', async () => {
      // A type whose required properties are a text and a multi-select (CONTRACT §2 "missing
      // required property"; §4: missing, null, "" and [] are empty).
      const contract = { key: 'contract', name: 'Contract', properties: [
        { key: 'ref', type: 'unique_key', required: true },
        { key: 'signatory', type: 'text', required: true },
        { key: 'regions', type: 'multi_select', options: ['eu', 'us'], required: true },
      ] }
      await applySetup(t.store.db, { ...ACME, metamodel: { ...ACME.metamodel, asset_types: [...ACME.metamodel.asset_types, contract] } } as unknown as SetupFile)
      const body = (ref: string, properties: Record<string, unknown>) => ({ asset_type_key: 'contract', name: ref, properties: { ref, signatory: 'ann', regions: ['eu'], ...properties } })
      const empty = await t.request('POST', '/api/v1/assets', { body: body('c-1', { signatory: '', regions: [] }) })
      expect(empty.status).toBe(422)
      expect(empty.body.errors).toEqual([
        { status: '422', code: 'validation_failed', detail: 'signatory is required for asset type contract: an empty value ("") is none', source: { pointer: '/properties/signatory' } },
        { status: '422', code: 'validation_failed', detail: 'regions is required for asset type contract: an empty value ([]) is none', source: { pointer: '/properties/regions' } },
      ])
      const upsert = await t.request('PUT', '/api/v1/assets/contract:ref:c-1', { body: { name: 'c-1', properties: { signatory: '', regions: ['eu'] } } })
      expect(upsert.status).toBe(422)
      expect(upsert.body.errors[0].source).toEqual({ pointer: '/properties/signatory' })
      expect((await t.request('GET', '/api/v1/assets/contract:ref:c-1')).status).toBe(404)
      const blank = await t.request('POST', '/api/v1/assets', { body: body('c-2', { signatory: ' ' }) })
      expect(blank.status).toBe(201)
      for (const properties of [{ signatory: '' }, { regions: [] }]) {
        const patch = await t.request('PATCH', '/api/v1/assets/contract:ref:c-2', { body: { name: 'renamed', properties } })
        expect(patch.status, JSON.stringify(properties)).toBe(422)
        expect(patch.body.errors[0].detail, JSON.stringify(properties)).toMatch(/is required for asset type contract: an empty value/)
      }
      expect((await t.request('GET', '/api/v1/assets/contract:ref:c-2')).body.data).toEqual(blank.body.data)
      // An optional property may be empty.
      const optional = await t.request('POST', '/api/v1/assets', { body: server('empty-optional', { owner: '', tags: [] }) })
      expect(optional.status).toBe(201)
      expect(optional.body.data.properties).toMatchObject({ owner: '', tags: [] })
    })

    it('PATCH with the values the asset holds writes nothing: updated_at kept, single and bulk', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('same-1', { owner: 'ann' }) })).body.data
      await t.store.db.query(`UPDATE assets SET updated_at = '2020-01-01T00:00:00Z' WHERE id = $1`, [a.id])
      const aged = { ...a, updated_at: '2020-01-01T00:00:00Z' }
      for (const body of [{}, { name: 'same-1' }, { properties: { environment: 'prod', managed: null } }, { access_domain_key: null, properties: { owner: 'ann', memory_gb: null } }]) {
        const res = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body })
        expect(res.status, JSON.stringify(body)).toBe(200)
        expect(res.body.data, JSON.stringify(body)).toEqual(aged)
      }
      const bulk = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: a.id, client_ref: 'c', name: 'same-1' }, { id: 'server:hostname:same-1', properties: { cpu_count: 8 } }] })
      expect(bulk.body).toEqual({ data: [{ id: a.id, client_ref: 'c' }, { id: a.id, client_ref: null }] })
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).body.data).toEqual(aged)
      // A real change still writes it.
      const changed = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'same-1b' } })
      expect(changed.body.data.updated_at).not.toBe('2020-01-01T00:00:00Z')
    })

    it('takes a multi-select sent in another order as the same options: the stored order is kept, and alone it is no change (PATCH, PUT, bulk)', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('set-1', { tags: ['pci', 'gdpr', 'legacy'] }) })).body.data
      expect(a.properties.tags).toEqual(['pci', 'gdpr', 'legacy'])
      await t.store.db.query(`UPDATE assets SET updated_at = '2020-01-01T00:00:00Z' WHERE id = $1`, [a.id])
      const aged = { ...a, updated_at: '2020-01-01T00:00:00Z' }
      await t.settled()
      const events = async () => (await t.request('GET', `/api/v1/events?filter[subject]=assets/${a.id}`)).body.data
      const patch = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { properties: { tags: ['legacy', 'pci', 'gdpr'] } } })
      expect(patch.body.data).toEqual(aged)
      const put = await t.request('PUT', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:set-1', name: 'set-1', properties: { ...a.properties, tags: ['gdpr', 'legacy', 'pci'] } }] })
      expect(put.body.data).toEqual([{ id: a.id, client_ref: null, result: 'unchanged' }])
      expect((await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: a.id, properties: { tags: ['gdpr', 'pci', 'legacy'] } }] })).status).toBe(200)
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).body.data).toEqual(aged)
      await t.settled()
      expect((await events()).map((e: { type: string }) => e.type)).toEqual(['asset.created'])
      // With another change, that change alone is written and listed; the options keep their order.
      const renamed = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'set-1b', properties: { tags: ['legacy', 'gdpr', 'pci'] } } })
      expect(renamed.body.data.properties.tags).toEqual(['pci', 'gdpr', 'legacy'])
      // Other options are a change, in the order sent.
      const other = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { properties: { tags: ['gdpr', 'pci'] } } })
      expect(other.body.data.properties.tags).toEqual(['gdpr', 'pci'])
      await t.settled()
      const changes = (await events()).map((e: { type: string; data: { changes?: unknown } }) => [e.type, e.data.changes ?? null])
      expect(changes).toEqual([
        ['asset.created', null],
        ['asset.updated', { name: { from: 'set-1', to: 'set-1b' } }],
        ['asset.updated', { 'properties.tags': { from: ['pci', 'gdpr', 'legacy'], to: ['gdpr', 'pci'] } }],
      ])
    })

    it('refuses an unknown property key set to null (422) on every write, changing nothing', async () => {
      const a = (await t.request('POST', '/api/v1/assets', { body: server('null-key-1') })).body.data
      const unknown = (pointer: string) => ({ status: '422', code: 'validation_failed', detail: 'ownr is not a property of asset type server', source: { pointer } })
      const create = await t.request('POST', '/api/v1/assets', { body: server('null-key-2', { ownr: null }) })
      expect(create.status).toBe(422)
      expect(create.body.errors).toEqual([unknown('/properties/ownr')])
      const patch = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { name: 'renamed', properties: { ownr: null } } })
      expect(patch.status).toBe(422)
      expect(patch.body.errors).toEqual([unknown('/properties/ownr')])
      const bulkCreate = await t.request('POST', '/api/v1/bulk/assets', { body: [server('null-key-3'), server('null-key-4', { ownr: null })] })
      expect(bulkCreate.status).toBe(422)
      expect(bulkCreate.body.errors).toEqual([{ ...unknown('/1/properties/ownr'), meta: { index: 1, client_ref: null } }])
      const bulkPatch = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: a.id, properties: { ownr: null } }] })
      expect(bulkPatch.status).toBe(422)
      expect(bulkPatch.body.errors).toEqual([{ ...unknown('/0/properties/ownr'), meta: { index: 0, client_ref: null } }])
      for (const merge of ['', '?merge=true']) {
        const put = await t.request('PUT', `/api/v1/assets/server:hostname:null-key-1${merge}`, { body: { name: a.name, properties: { ...a.properties, ownr: null } } })
        expect(put.status, merge).toBe(422)
        expect(put.body.errors, merge).toEqual([unknown('/properties/ownr')])
      }
      expect((await t.request('GET', `/api/v1/assets/${a.id}`)).body.data).toEqual(a)
      expect((await t.request('GET', '/api/v1/assets?filter[name]=null-key-3')).body.data).toEqual([])
      // A property of the type set to null still clears it, as before.
      const cleared = await t.request('PATCH', `/api/v1/assets/${a.id}`, { body: { properties: { cpu_count: null } } })
      expect(cleared.status).toBe(200)
      expect(cleared.body.data.properties).toEqual({ hostname: 'null-key-1', environment: 'prod' })
    })

    it('PATCH by composite key, and 409 when the new unique value is taken', async () => {
      await t.request('POST', '/api/v1/assets', { body: server('pk-1') })
      await t.request('POST', '/api/v1/assets', { body: server('pk-2') })
      const res = await t.request('PATCH', '/api/v1/assets/server:hostname:pk-1', { body: { properties: { hostname: 'pk-2' } } })
      expect(res.status).toBe(409)
      const ok = await t.request('PATCH', '/api/v1/assets/server:hostname:pk-1', { body: { properties: { hostname: 'pk-3' } } })
      expect(ok.status).toBe(200)
      expect((await t.request('GET', '/api/v1/assets/server:hostname:pk-3')).body.data.id).toBe(ok.body.data.id)
    })

    it('rejects unknown asset types and access domains with 422', async () => {
      const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'spaceship', name: 'x', access_domain_key: 'mars' } })
      expect(res.status).toBe(422)
      expect(res.body.errors.map((e: { source: { pointer: string } }) => e.source.pointer).sort()).toEqual(['/access_domain_key', '/asset_type_key'])
    })

    it('lists the first 100 failures of a body, then how many more', async () => {
      const res = await t.request('POST', '/api/v1/assets', { body: { ...server('wide-1'), ...Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`u${i}`, 1])) } })
      expect([res.status, res.body.errors.length]).toEqual([400, 101])
      expect(res.body.errors[99]).toEqual({ status: '400', code: 'invalid_request', detail: 'unknown field "u99"', source: { pointer: '/u99' } })
      expect(res.body.errors[100]).toEqual({ status: '400', code: 'invalid_request', detail: '50 more failures not listed: an answer lists the first 100', source: { pointer: '' } })
    })

    it('answers 400 invalid_request for unknown fields and malformed JSON, and 422 for a missing name', async () => {
      const unknown = await t.request('POST', '/api/v1/assets', { body: { ...server('u-1'), colour: 'red' } })
      expect(unknown.status).toBe(400)
      expect(unknown.body.errors[0]).toMatchObject({ code: 'invalid_request', source: { pointer: '/colour' } })
      const malformed = await t.app.inject({
        method: 'POST', url: '/api/v1/assets', payload: '{"name": ', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      })
      expect(malformed.statusCode).toBe(400)
      expect(JSON.parse(malformed.body).errors[0]).toMatchObject({ status: '400', code: 'invalid_request' })
      const missing = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server' } })
      expect(missing.status).toBe(422)
      expect(missing.body.errors[0]).toMatchObject({ code: 'validation_failed', source: { pointer: '/name' } })
    })

    it('answers 413 payload_too_large for a body over the limit', async () => {
      const res = await t.request('POST', '/api/v1/assets', { body: server('big', { notes: 'x'.repeat(2 * 1024 * 1024) }) })
      expect(res.status).toBe(413)
      expect(res.body.errors[0]).toMatchObject({ status: '413', code: 'payload_too_large' })
    })

    it('answers 404 in the error envelope for unknown routes, naming the methods a known path takes, once the key is checked (401 without one)', async () => {
      const takes: Record<string, string | undefined> = { '/api/v1/nothing-here': undefined, '/api/v1/relationships': 'GET, HEAD, POST', '/api/v1/assets': 'GET, HEAD, POST' }
      for (const [method, url] of [['GET', '/api/v1/nothing-here'], ['PUT', '/api/v1/relationships'], ['DELETE', '/api/v1/assets']]) {
        const res = await t.request(method!, url!)
        expect(res.status, `${method} ${url}`).toBe(404)
        const allowed = takes[url!]
        expect(res.body.errors[0]).toMatchObject({ status: '404', code: 'not_found', detail: `no route ${method} ${url}${allowed ? `: it takes ${allowed}` : ''}` })
        expect(res.headers.allow, `${method} ${url}`).toBe(allowed)
        // An authenticated answer: with the organization's quota (CONTRACT §10).
        expect(res.headers['ratelimit-limit'], `${method} ${url}`).toMatch(/^\d+$/)
        for (const key of [null, 'kbis_000000000000_not-a-key']) {
          const anonymous = await t.request(method!, url!, { key })
          expect(anonymous.status, `${method} ${url} ${key}`).toBe(401)
          // Which methods a path takes is not told without a key either.
          expect(anonymous.headers.allow).toBeUndefined()
          expect(anonymous.headers['www-authenticate']).toBe('Bearer')
        }
      }
      // Outside /api/v1 there is no key to check.
      expect((await t.request('GET', '/nothing-here', { key: null })).status).toBe(404)
      // A path with parameters, and one under another route's path: by segments.
      const byId = await t.request('POST', '/api/v1/assets/01a21f8f-8a31-70d4-8529-9f7dfff8c851')
      expect([byId.status, byId.headers.allow]).toEqual([404, 'DELETE, GET, HEAD, PATCH, PUT'])
      const deeper = await t.request('GET', '/api/v1/assets/01a21f8f-8a31-70d4-8529-9f7dfff8c851/nothing-here')
      expect([deeper.status, deeper.headers.allow, deeper.body.errors[0].detail]).toEqual([404, undefined, 'no route GET /api/v1/assets/01a21f8f-8a31-70d4-8529-9f7dfff8c851/nothing-here'])
    })
  })
}
