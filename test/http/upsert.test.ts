import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const PAST = '2020-01-01T00:00:00Z'

for (const store of STORES) {
  describe(`${store}: upsert and dry run (CONTRACT §16)`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const get = async (ref: string) => (await t.request('GET', `/api/v1/assets/${ref}`)).body.data
    /** Moves updated_at into the past, so that any write would visibly change it. */
    const age = async (id: string) => t.store.db.query(`UPDATE assets SET updated_at = $2 WHERE id = $1`, [id, PAST])
    const count = async (sql: string, params: unknown[] = []) => (await t.store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params)).rows[0]!.n

    it('PUT creates (201), leaves an equal asset unchanged (200, updated_at kept) and replaces a different one (200)', async () => {
      const body = { name: 'up-1', access_domain_key: 'it', properties: { environment: 'prod', cpu_count: 4 } }
      const created = await t.request('PUT', '/api/v1/assets/server:hostname:up-1', { body })
      expect(created.status).toBe(201)
      const id = created.body.data.id
      expect(created.body.data).toEqual({
        id: expect.stringMatching(UUID), asset_type_key: 'server', name: 'up-1', access_domain_key: 'it',
        properties: { hostname: 'up-1', environment: 'prod', cpu_count: 4 },
        created_at: expect.any(String), updated_at: expect.any(String),
      })
      await age(id)
      const same = await t.request('PUT', '/api/v1/assets/server:hostname:up-1', { body: { ...body, asset_type_key: 'server', properties: { ...body.properties, hostname: 'up-1' } } })
      expect(same.status).toBe(200)
      expect(same.body.data).toEqual({ ...created.body.data, updated_at: PAST })
      expect((await get(id)).updated_at).toBe(PAST)

      const changed = await t.request('PUT', '/api/v1/assets/server:hostname:up-1', { body: { name: 'up-1 renamed', properties: { cpu_count: 8 } } })
      expect(changed.status).toBe(200)
      // Replace: properties not sent are cleared, an omitted access domain is null.
      expect(changed.body.data).toMatchObject({ id, name: 'up-1 renamed', access_domain_key: null, properties: { hostname: 'up-1', cpu_count: 8 } })
      expect(changed.body.data.updated_at).not.toBe(PAST)
      expect(await get(id)).toEqual(changed.body.data)
    })

    it('PUT ?merge=true merges properties as PATCH (null clears) and keeps an omitted access domain', async () => {
      const id = (await t.request('PUT', '/api/v1/assets/server:hostname:merge-1', { body: { name: 'm', access_domain_key: 'it', properties: { environment: 'dev', cpu_count: 2, owner: 'ann' } } })).body.data.id
      const merged = await t.request('PUT', '/api/v1/assets/server:hostname:merge-1?merge=true', { body: { name: 'm', properties: { cpu_count: 16, owner: null } } })
      expect(merged.status).toBe(200)
      expect(merged.body.data).toMatchObject({ id, access_domain_key: 'it', properties: { hostname: 'merge-1', environment: 'dev', cpu_count: 16 } })
      expect(Object.keys(merged.body.data.properties).sort()).toEqual(['cpu_count', 'environment', 'hostname'])
      await age(id)
      const again = await t.request('PUT', '/api/v1/assets/server:hostname:merge-1?merge=true', { body: { name: 'm', properties: { environment: 'dev' } } })
      expect(again.status).toBe(200)
      expect(again.body.data.updated_at).toBe(PAST)
    })

    it('PUT refuses a key that is no composite key (404), another type or unique value in the body (422) and a role without edit (403)', async () => {
      const byId = await t.request('PUT', '/api/v1/assets/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', { body: { name: 'x' } })
      expect(byId.status).toBe(404)
      expect(byId.body.errors[0].detail).toBe('asset 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b not found: PUT names an asset by its composite key type:unique_property:value (to change an asset by its id, PATCH /assets/{id})')
      expect((await t.request('PUT', '/api/v1/assets/note:body:x', { body: { name: 'x' } })).body.errors[0].code).toBe('not_found')
      const wrong = await t.request('PUT', '/api/v1/assets/server:hostname:w-1', { body: { asset_type_key: 'application', name: 'x', properties: { hostname: 'w-2' } } })
      expect(wrong.status).toBe(422)
      expect(wrong.body.errors).toEqual([
        { status: '422', code: 'validation_failed', detail: 'asset_type_key must be server, the type of the key', source: { pointer: '/asset_type_key' } },
        { status: '422', code: 'validation_failed', detail: 'hostname must be w-1, the value of the key', source: { pointer: '/properties/hostname' } },
      ])
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const denied = await t.request('PUT', '/api/v1/assets/server:hostname:w-3', { key: editor, body: { name: 'x', access_domain_key: 'finance' } })
      expect(denied.status).toBe(403)
      expect(await count(`assets WHERE unique_value LIKE 'w-%'`)).toBe(0)
    })

    it('PUT /bulk/assets answers created, updated and unchanged per item, and syncs embedded relationships', async () => {
      await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          { asset_type_key: 'server', name: 'b-same', properties: { hostname: 'b-same', cpu_count: 2 } },
          { asset_type_key: 'server', name: 'b-old', properties: { hostname: 'b-old', cpu_count: 2 } },
        ],
      })
      const same = await get('server:hostname:b-same')
      await age(same.id)
      const res = await t.request('PUT', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:b-same', client_ref: 'r0', name: 'b-same', properties: { cpu_count: 2 } },
          { id: 'server:hostname:b-old', name: 'b-new-name', properties: { cpu_count: 2 } },
          { id: 'application:code:b-app', client_ref: 'r2', name: 'app', relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:b-same' }] } } } },
        ],
      })
      expect(res.status).toBe(200)
      const app = await get('application:code:b-app')
      const old = await get('server:hostname:b-old')
      expect(res.body).toEqual({
        data: [
          { id: same.id, client_ref: 'r0', result: 'unchanged' },
          { id: old.id, client_ref: null, result: 'updated' },
          { id: app.id, client_ref: 'r2', result: 'created' },
        ],
      })
      expect(old.name).toBe('b-new-name')
      expect((await get(same.id)).updated_at).toBe(PAST)
      expect(await count('relationships WHERE source_asset_id = $1 AND target_asset_id = $2', [app.id, same.id])).toBe(1)
    })

    it('PUT /bulk/assets calls an item whose embedded relationships it changed updated, and unchanged only when they stay', async () => {
      await t.request('PUT', '/api/v1/bulk/assets', { body: [{ id: 'server:hostname:rel-srv', name: 'rel-srv' }, { id: 'application:code:rel-app', name: 'rel-app' }] })
      const item = (related: string[]) => [{ id: 'application:code:rel-app', name: 'rel-app', relationships: { outgoing: { runs_on: { related_assets: related.map((id) => ({ id })) } } } }]
      const results = async (related: string[]) => (await t.request('PUT', '/api/v1/bulk/assets', { body: item(related) })).body.data.map((d: { result: string }) => d.result)
      const linked = async () => count("relationships r JOIN assets a ON a.id = r.source_asset_id WHERE a.unique_value = 'rel-app'")
      expect(await results(['server:hostname:rel-srv'])).toEqual(['updated'])
      expect(await linked()).toBe(1)
      expect(await results(['server:hostname:rel-srv'])).toEqual(['unchanged'])
      expect(await results([])).toEqual(['updated'])
      expect(await linked()).toBe(0)
      expect(await results([])).toEqual(['unchanged'])
    })

    it('an unchanged re-run is told by its look-up alone (no UPDATE); values whose text JS cannot tell fall back on SQL', async () => {
      const items = [
        // Every kind of property value, keys in an order jsonb does not keep, escapes and non-ASCII text.
        { id: 'server:hostname:u-1', name: 'u-1 ✓', access_domain_key: 'it', properties: { summary: 'quote " backslash \\ tab \t newline \n \u0001 ünï 🚀', tags: ['pci', 'gdpr'], cost: 800.5, managed: false, uptime: 99.95, purchased_on: '2024-02-29', environment: 'prod', cpu_count: 12 } },
        { id: 'server:hostname:u-2', name: 'u-2', properties: {} },
        // Large enough to be told by the digest of its text rather than by its text (store/jsonb-text.ts).
        { id: 'server:hostname:u-4', name: 'u-4', properties: { summary: Array.from({ length: 400 }, (_, i) => `line ${i} ✓ ${(i * 7919) % 1000}`).join('\n') } },
        // JS writes 1e-7 and 1e21 with an exponent; the stored numeric prints them in full.
        { id: 'server:hostname:u-3', name: 'u-3', properties: { memory_gb: 1e-7, cost: 1e21 } },
      ]
      const put = async () => {
        const res = await t.request('PUT', '/api/v1/bulk/assets', { body: items })
        expect(res.status).toBe(200)
        return res.body.data.map((d: { result: string }) => d.result)
      }
      expect(await put()).toEqual(['created', 'created', 'created', 'created'])
      const ids = await Promise.all(items.map(async (item) => (await get(item.id)).id))
      for (const id of ids) await age(id)
      const statements: string[] = []
      t.store.db.onQuery = (sql) => { statements.push(sql) }
      try {
        expect(await put()).toEqual(['unchanged', 'unchanged', 'unchanged', 'unchanged'])
        // u-1, u-2 and u-4 were told unchanged by the look-up; only u-3 went to the UPDATE, which
        // compared it in SQL and wrote nothing.
        const updates = statements.filter((sql) => /^WITH upd AS \(\s*UPDATE assets/.test(sql))
        expect(updates).toHaveLength(1)
        statements.length = 0
        expect(await put()).toEqual(['unchanged', 'unchanged', 'unchanged', 'unchanged'])
        items.pop()
        statements.length = 0
        expect(await put()).toEqual(['unchanged', 'unchanged', 'unchanged'])
        expect(statements.filter((sql) => /UPDATE assets/.test(sql))).toEqual([])
        // A change the look-up must see: name, access domain, one property value.
        for (const change of [{ name: 'u-1 renamed' }, { access_domain_key: null }, { properties: { ...items[0]!.properties, cpu_count: 13 } }]) {
          Object.assign(items[0]!, change)
          expect(await put()).toEqual(['updated', 'unchanged', 'unchanged'])
        }
        // One character of the large document.
        items[2]!.properties = { summary: `${items[2]!.properties.summary as string}.` }
        expect(await put()).toEqual(['unchanged', 'unchanged', 'updated'])
      } finally {
        t.store.db.onQuery = null
      }
      for (const id of [ids[1]!, ids[3]!]) expect((await get(id)).updated_at).toBe(PAST)
      expect(await get(ids[0]!)).toMatchObject({ name: 'u-1 renamed', access_domain_key: null, properties: { ...items[0]!.properties, hostname: 'u-1' } })
    })

    it('an item equal to the stored asset still needs edit on it; one that differs only by a property sent as null is unchanged', async () => {
      const item = { id: 'server:hostname:eq-1', client_ref: 'e0', name: 'eq-1', access_domain_key: 'finance', properties: { environment: 'prod', tags: ['pci'] } }
      expect((await t.request('PUT', '/api/v1/bulk/assets', { body: [item] })).body.data[0].result).toBe('created')
      const id = (await get(item.id)).id
      await age(id)
      // The IT editor sees finance servers but may not change them, even to the values they hold.
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      const denied = await t.request('PUT', '/api/v1/bulk/assets', { key: editor, body: [item] })
      expect(denied.status).toBe(403)
      expect(denied.body.errors).toEqual([
        { status: '403', code: 'forbidden', detail: "the key's roles do not allow to change server assets in access domain finance", source: { pointer: '/0' }, meta: { index: 0, client_ref: 'e0' } },
      ])
      const withNull = { ...item, properties: { ...item.properties, owner: null } }
      const res = await t.request('PUT', '/api/v1/bulk/assets', { body: [withNull] })
      expect(res.status).toBe(200)
      expect(res.body.data).toEqual([{ id, client_ref: 'e0', result: 'unchanged' }])
      expect(await get(id)).toMatchObject({ updated_at: PAST, properties: { hostname: 'eq-1', environment: 'prod', tags: ['pci'] } })
    })

    it('concurrent upserts of one new key create it once and replace or keep it, never 409 (CONTRACT §1, §16)', async () => {
      for (let round = 0; round < 3; round++) {
        const key = `server:hostname:race-${round}`
        const answers = await Promise.all(Array.from({ length: 6 }, (_, i) =>
          t.request('PUT', `/api/v1/assets/${key}`, { body: { name: `race ${round}`, properties: { cpu_count: (i % 2) + 1 } } })))
        expect(answers.map((a) => a.status).sort(), JSON.stringify(answers.find((a) => a.status >= 400)?.body)).toEqual([200, 200, 200, 200, 200, 201])
        expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1)
        expect(await count("assets WHERE unique_value = $1 AND archived_at IS NULL", [`race-${round}`])).toBe(1)
      }
      // The same in bulk: every request answers every item, one of them created each asset.
      const items = Array.from({ length: 20 }, (_, i) => ({ id: `server:hostname:race-bulk-${i}`, name: `race bulk ${i}` }))
      const bulks = await Promise.all(Array.from({ length: 4 }, () => t.request('PUT', '/api/v1/bulk/assets', { body: items })))
      expect(bulks.map((b) => b.status)).toEqual([200, 200, 200, 200])
      const results = bulks.flatMap((b) => b.body.data.map((d: { result: string }) => d.result))
      expect(results.filter((r) => r === 'created')).toHaveLength(20)
      expect(results.filter((r) => r !== 'created').every((r) => r === 'unchanged' || r === 'updated')).toBe(true)
      expect(await count("assets WHERE unique_value LIKE 'race-bulk-%' AND archived_at IS NULL")).toBe(20)
    })

    it('concurrent replacing upserts of one asset each change it from the value the one before left: the events chain, the last is what is stored', async () => {
      for (let round = 0; round < 4; round++) {
        const key = `server:hostname:chain-${round}`
        const created = await t.request('PUT', `/api/v1/assets/${key}`, { body: { name: 'chain', properties: { cpu_count: 1 } } })
        expect(created.status).toBe(201)
        // Half the PUTs set a new value, half the value it had at first: a PUT that compared with
        // what it read before another had written would call itself unchanged and lose its write.
        const puts = Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? 1 : i + 10))
        const answers = await Promise.all(puts.map((cpu, i) => (i === 5
          ? t.request('PUT', '/api/v1/bulk/assets', { body: [{ id: key, name: 'chain', properties: { cpu_count: cpu } }] })
          : t.request('PUT', `/api/v1/assets/${key}`, { body: { name: 'chain', properties: { cpu_count: cpu } } }))))
        expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200])
        await t.settled()
        const events = (await t.request('GET', `/api/v1/events?filter[subject]=assets/${created.body.data.id}&page[size]=100`)).body.data as any[]
        events.sort((a, b) => Number(a.sequence) - Number(b.sequence))
        expect(events[0].type).toBe('asset.created')
        let value = 1
        for (const event of events.slice(1)) {
          expect(event.type).toBe('asset.updated')
          expect(event.data.changes['properties.cpu_count'].from, JSON.stringify(events.map((e) => e.data.changes))).toBe(value)
          value = event.data.changes['properties.cpu_count'].to
          expect(event.data.object.properties.cpu_count).toBe(value)
        }
        expect((await get(key)).properties.cpu_count).toBe(value)
      }
    })

    it('PUT /bulk/assets is all or nothing and lists every failing item', async () => {
      const res = await t.request('PUT', '/api/v1/bulk/assets', {
        body: [
          { id: 'server:hostname:f-ok', name: 'ok' },
          { id: 'not-a-key', client_ref: 'c1', name: 'x' },
          { id: 'server:hostname:f-bad', name: 'bad', properties: { cpu_count: 'many' } },
          { id: 'server:hostname:f-ok', name: 'twice' },
        ],
      })
      expect(res.status).toBe(422)
      expect(res.body.errors).toEqual([
        { status: '422', code: 'validation_failed', detail: 'not-a-key is not a composite key type:unique_property:value of an asset type with a unique key', source: { pointer: '/1/id' }, meta: { index: 1, client_ref: 'c1' } },
        { status: '422', code: 'validation_failed', detail: expect.stringContaining('cpu_count'), source: { pointer: '/2/properties/cpu_count' }, meta: { index: 2, client_ref: null } },
        { status: '409', code: 'unique_violation', detail: 'server f-ok: the same asset is given by item 0', source: { pointer: '/3/id' }, meta: { index: 3, client_ref: null } },
      ])
      expect(await count(`assets WHERE unique_value LIKE 'f-%'`)).toBe(0)
    })

    it('?dry_run=true runs every write, answers 200 with the item count and writes nothing, relationships included', async () => {
      const server = (await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'd-srv', properties: { hostname: 'd-srv' } } })).body.data
      await age(server.id)
      const before = await count('assets')
      const relationshipsBefore = await count('relationships')
      const embedded = { outgoing: { runs_on: { related_assets: [{ id: server.id }] } } }
      const writes: [string, string, unknown, number][] = [
        ['POST', '/api/v1/assets', { asset_type_key: 'application', name: 'd', properties: { code: 'd-1' }, relationships: embedded }, 1],
        ['PATCH', `/api/v1/assets/${server.id}`, { name: 'changed', properties: { cpu_count: 3 } }, 1],
        ['PUT', '/api/v1/assets/server:hostname:d-srv', { name: 'replaced' }, 1],
        ['PUT', '/api/v1/assets/application:code:d-2', { name: 'new', relationships: embedded }, 1],
        ['POST', '/api/v1/relationships', { relationship_type_key: 'depends_on', source_asset_id: server.id, target_asset_id: server.id }, 1],
        ['POST', '/api/v1/bulk/assets', [{ asset_type_key: 'server', name: 'd', properties: { hostname: 'd-3' } }, { asset_type_key: 'application', name: 'd', properties: { code: 'd-4' }, relationships: embedded }], 2],
        ['PATCH', '/api/v1/bulk/assets', [{ id: server.id, name: 'changed' }], 1],
        ['PUT', '/api/v1/bulk/assets', [{ id: 'server:hostname:d-srv', name: 'x' }, { id: 'server:hostname:d-5', name: 'y' }, { id: 'application:code:d-6', name: 'z', relationships: embedded }], 3],
        ['POST', '/api/v1/bulk/relationships', [{ relationship_type_key: 'depends_on', source_asset_id: server.id, target_asset_id: 'server:hostname:d-srv' }], 1],
      ]
      for (const [method, url, body, items] of writes) {
        const res = await t.request(method, `${url}?dry_run=true`, { body })
        expect({ method, url, status: res.status, body: res.body }).toEqual({ method, url, status: 200, body: { data: null, meta: { dry_run: true, items } } })
      }
      expect(await count('assets')).toBe(before)
      expect(await count('relationships')).toBe(relationshipsBefore)
      expect(await get(server.id)).toEqual({ ...server, updated_at: PAST })
      // The same writes for real do write: the dry runs above passed every check of a real write.
      expect((await t.request('PUT', '/api/v1/assets/application:code:d-2', { body: { name: 'new', relationships: embedded } })).status).toBe(201)
      expect(await count('relationships')).toBe(relationshipsBefore + 1)
    })

    it('a dry run fails exactly as the real request', async () => {
      await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name: 'e-taken', properties: { hostname: 'e-taken' } } })
      const cases: [string, string, unknown][] = [
        ['POST', '/api/v1/assets', { asset_type_key: 'server', name: 'e', properties: { hostname: 'e-taken', cpu_count: 0 } }],
        ['POST', '/api/v1/assets', { asset_type_key: 'server', name: 'e', properties: { hostname: 'e-taken' } }],
        ['PATCH', '/api/v1/assets/server:hostname:e-missing', { name: 'e' }],
        ['PUT', '/api/v1/assets/server:hostname:e-new', { name: 'e', properties: { environment: 'moon' } }],
        ['POST', '/api/v1/relationships', { relationship_type_key: 'runs_on', source_asset_id: 'server:hostname:e-taken', target_asset_id: 'server:hostname:e-taken' }],
        ['POST', '/api/v1/bulk/assets', [{ asset_type_key: 'server', name: 'e', properties: { hostname: 'e-1' } }, { asset_type_key: 'server', name: 'e', properties: { hostname: 'e-1' } }, { asset_type_key: 'nope', name: 'e', client_ref: 'z' }]],
        ['PUT', '/api/v1/bulk/assets', [{ id: 'server:hostname:e-2', name: 'e', properties: { tags: ['nope'] } }, { id: 'x', name: 'e' }]],
      ]
      for (const [method, url, body] of cases) {
        const real = await t.request(method, url, { body })
        const dry = await t.request(method, `${url}?dry_run=true`, { body })
        expect(real.status).toBeGreaterThanOrEqual(400)
        expect({ method, url, status: dry.status, body: dry.body }).toEqual({ method, url, status: real.status, body: real.body })
      }
      expect(await count(`assets WHERE unique_value LIKE 'e-%'`)).toBe(1)
    })

    it('documents PUT and the dry_run and merge query parameters in the base and typed OpenAPI documents', async () => {
      const base = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body
      const typed = (await t.request('GET', '/api/v1/openapi/typed.json')).body
      const names = (op: { parameters?: { name: string; in: string }[] }) => (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name).sort()
      for (const doc of [base, typed]) {
        expect(names(doc.paths['/api/v1/assets/{id}'].put)).toEqual(['dry_run', 'merge'])
        expect(names(doc.paths['/api/v1/bulk/assets'].put)).toEqual(['dry_run', 'merge'])
        expect(Object.keys(doc.paths['/api/v1/assets/{id}'].put.responses)).toEqual(expect.arrayContaining(['200', '201', '404', '409', '422']))
        for (const [path, method] of [['/api/v1/assets', 'post'], ['/api/v1/assets/{id}', 'patch'], ['/api/v1/relationships', 'post'],
          ['/api/v1/bulk/assets', 'post'], ['/api/v1/bulk/assets', 'patch'], ['/api/v1/bulk/relationships', 'post']] as const) {
          expect({ path, method, query: names(doc.paths[path][method]) }).toEqual({ path, method, query: ['dry_run'] })
        }
      }
      // Its 200: the results, or a dry run's count.
      const result = base.paths['/api/v1/bulk/assets'].put.responses['200'].content['application/json'].schema.oneOf[0].properties.data.items.properties.result
      expect(result.enum).toEqual(['created', 'updated', 'unchanged'])
    })
  })
}
