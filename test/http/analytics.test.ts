import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { bulkCreateRelationships, seedAssets } from '../helpers/seed.js'
import { ACME } from '../helpers/fixtures.js'

const SERVERS = [
  { name: 's1', access_domain_key: 'it', properties: { hostname: 's1', environment: 'prod', memory_gb: 16, cost: 100.5, tags: ['pci'], owner: 'Ann', purchased_on: '2024-01-15', cpu_count: 8, managed: true } },
  { name: 's2', access_domain_key: 'finance', properties: { hostname: 's2', environment: 'prod', memory_gb: 32, cost: 200, tags: ['pci', 'gdpr'], owner: 'Bob', purchased_on: '2024-02-20', cpu_count: 16, managed: false } },
  { name: 's3', access_domain_key: 'it', properties: { hostname: 's3', environment: 'dev', memory_gb: 8, cost: 50.25, tags: [], owner: 'Ann', purchased_on: '2024-04-01', cpu_count: 4 } },
  { name: 's4', access_domain_key: null, properties: { hostname: 's4', tags: ['legacy'], purchased_on: '2023-12-31' } },
]
const APPS = [
  { name: 'crm', access_domain_key: 'it', properties: { code: 'crm', tier: 'gold', owner: 'Ann' } },
  { name: 'erp', access_domain_key: 'finance', properties: { code: 'erp', tier: 'silver' } },
  { name: 'hr', access_domain_key: 'it', properties: { code: 'hr', tier: 'gold' } },
]
const servers = { field: 'asset_type_key', operator: 'equals', value: 'server' }
const apps = { field: 'asset_type_key', operator: 'equals', value: 'application' }

for (const store of STORES) {
  describe(`${store}: POST /analytics/assets`, () => {
    let t: TestApp
    let createdAt = ''

    beforeAll(async () => {
      t = await createTestApp(store)
      const ids = await seedAssets(t, [['server', SERVERS], ['application', APPS]])
      const last = await t.request('GET', `/api/v1/assets/${ids[APPS.at(-1)!.name]}`)
      expect(last.status).toBe(200)
      createdAt = last.body.data.created_at
      const links: [string, string, string][] = [['runs_on', 'application:code:crm', 'server:hostname:s1'], ['runs_on', 'application:code:crm', 'server:hostname:s2'],
        ['runs_on', 'application:code:erp', 'server:hostname:s2'], ['depends_on', 'server:hostname:s3', 'application:code:crm']]
      await bulkCreateRelationships(t, links.map(([type, source, target]) => ({ relationship_type_key: type, source_asset_id: source, target_asset_id: target })))
    })
    afterAll(async () => t.close())

    const analytics = async (body: unknown, key?: string) => {
      const res = await t.request('POST', '/api/v1/analytics/assets', { body, ...(key ? { key } : {}) })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body
    }
    /** The groups as [group values…, count] rows, for compact expectations. */
    const counts = async (body: Record<string, unknown>, key?: string) =>
      (await analytics(body, key)).data.map((row: { group: Record<string, unknown>; measures: { count: number } }) => [...Object.values(row.group), row.measures.count])

    it('counts every asset in one row without group_by', async () => {
      expect(await analytics(undefined)).toEqual({ data: [{ group: {}, measures: { count: 7 } }], meta: { total_groups: 1 } })
    })

    it('computes each measure per group, with default names and `as`, the empty group last', async () => {
      const body = await analytics({
        filter: servers,
        measures: [{ type: 'count' }, { type: 'count_distinct', field: 'properties.owner' }, { type: 'sum', field: 'properties.cost' }, { type: 'average', field: 'properties.memory_gb', as: 'avg_memory' }],
        group_by: ['properties.environment'],
      })
      expect(body).toEqual({
        data: [
          { group: { 'properties.environment': 'dev' }, measures: { count: 1, 'count_distinct:properties.owner': 1, 'sum:properties.cost': 50.25, avg_memory: 8 } },
          { group: { 'properties.environment': 'prod' }, measures: { count: 2, 'count_distinct:properties.owner': 2, 'sum:properties.cost': 300.5, avg_memory: 24 } },
          { group: { 'properties.environment': null }, measures: { count: 1, 'count_distinct:properties.owner': 0, 'sum:properties.cost': 0, avg_memory: 0 } },
        ],
        meta: { total_groups: 3 },
      })
    })

    it('groups by several fields in order, each ascending, empty last', async () => {
      expect(await counts({ group_by: ['asset_type_key', 'properties.owner'] })).toEqual([
        ['application', 'Ann', 1], ['application', null, 2], ['server', 'Ann', 2], ['server', 'Bob', 1], ['server', null, 1],
      ])
    })

    it('groups numbers as numbers and booleans as booleans', async () => {
      expect(await counts({ filter: servers, group_by: ['properties.cpu_count'] })).toEqual([[4, 1], [8, 1], [16, 1], [null, 1]])
      expect(await counts({ filter: servers, group_by: ['properties.managed'] })).toEqual([[false, 1], [true, 1], [null, 2]])
    })

    it('puts an asset in one group per option of a multi-select, none in the null group', async () => {
      const body = await analytics({ filter: servers, measures: [{ type: 'count' }, { type: 'sum', field: 'properties.cost', as: 'cost' }], group_by: ['properties.tags'] })
      expect(body.data).toEqual([
        { group: { 'properties.tags': 'gdpr' }, measures: { count: 1, cost: 200 } },
        { group: { 'properties.tags': 'legacy' }, measures: { count: 1, cost: 0 } },
        { group: { 'properties.tags': 'pci' }, measures: { count: 2, cost: 300.5 } },
        { group: { 'properties.tags': null }, measures: { count: 1, cost: 50.25 } },
      ])
    })

    it('groups by the types of related assets, one group per type, none in the null group', async () => {
      const related = (extra: Record<string, unknown>) => ({ field: 'related_asset_type_key', ...extra })
      expect(await counts({ filter: apps, group_by: [related({ relationship_type_key: 'runs_on', direction: 'outgoing' })] })).toEqual([['server', 2], [null, 1]])
      expect(await counts({ filter: servers, group_by: [related({ relationship_type_key: 'runs_on', direction: 'incoming' })] })).toEqual([['application', 2], [null, 2]])
      expect(await counts({ filter: servers, group_by: [related({})] })).toEqual([['application', 1], [null, 3]])
    })

    it('buckets created_at by interval, in UTC, as the bucket\'s first second', async () => {
      const day = createdAt.slice(0, 10)
      const monday = new Date(`${day}T00:00:00Z`)
      monday.setUTCDate(monday.getUTCDate() - ((monday.getUTCDay() + 6) % 7))
      const group = (interval: string) => counts({ group_by: [{ field: 'created_at', interval }] })
      expect(await group('day')).toEqual([[`${day}T00:00:00Z`, 7]])
      expect(await group('week')).toEqual([[`${monday.toISOString().slice(0, 10)}T00:00:00Z`, 7]])
      expect(await group('month')).toEqual([[`${day.slice(0, 7)}-01T00:00:00Z`, 7]])
      expect(await group('year')).toEqual([[`${day.slice(0, 4)}-01-01T00:00:00Z`, 7]])
    })

    it('groups date properties as dates, or by interval', async () => {
      expect(await counts({ filter: servers, group_by: ['properties.purchased_on'] })).toEqual([['2023-12-31', 1], ['2024-01-15', 1], ['2024-02-20', 1], ['2024-04-01', 1]])
      expect(await counts({ filter: servers, group_by: [{ field: 'properties.purchased_on', interval: 'quarter' }] })).toEqual([['2023-10-01', 1], ['2024-01-01', 2], ['2024-04-01', 1]])
    })

    it('breaks each group down, counting each asset once per group', async () => {
      const body = await analytics({ filter: servers, measures: [{ type: 'count' }], group_by: ['properties.environment'], breakdown_by: 'properties.tags' })
      expect(body).toEqual({
        data: [
          { group: { 'properties.environment': 'dev' }, measures: { count: 1 }, breakdown: [{ value: null, measures: { count: 1 } }] },
          { group: { 'properties.environment': 'prod' }, measures: { count: 2 }, breakdown: [{ value: 'gdpr', measures: { count: 1 } }, { value: 'pci', measures: { count: 2 } }] },
          { group: { 'properties.environment': null }, measures: { count: 1 }, breakdown: [{ value: 'legacy', measures: { count: 1 } }] },
        ],
        meta: { total_groups: 3 },
      })
    })

    it('breaks down without group_by', async () => {
      const body = await analytics({ filter: apps, measures: [{ type: 'count_distinct', field: 'properties.owner', as: 'owners' }], breakdown_by: 'properties.tier' })
      expect(body.data).toEqual([{ group: {}, measures: { owners: 1 }, breakdown: [{ value: 'gold', measures: { owners: 1 } }, { value: 'silver', measures: { owners: 0 } }] }])
    })

    it('answers no groups for no match, and zero measures (an average of nothing too) without group_by', async () => {
      const none = { field: 'name', operator: 'equals', value: 'nothing' }
      expect(await analytics({ filter: none, group_by: ['asset_type_key'] })).toEqual({ data: [], meta: { total_groups: 0 } })
      expect(await analytics({ filter: none, measures: [{ type: 'count' }, { type: 'sum', field: 'properties.cost' }, { type: 'average', field: 'properties.cost' }] })).toEqual({
        data: [{ group: {}, measures: { count: 0, 'sum:properties.cost': 0, 'average:properties.cost': 0 } }], meta: { total_groups: 1 },
      })
    })

    it('counts only what the key\'s roles show, related assets included', async () => {
      const editor = await t.givenKey({ user: 'editor@acme.test', type: 'Editor', roles: ['it_editor'] })
      expect(await counts({ group_by: ['asset_type_key'] }, editor)).toEqual([['application', 2], ['server', 3]])
      expect(await counts({ filter: servers, group_by: [{ field: 'related_asset_type_key', relationship_type_key: 'runs_on', direction: 'incoming' }] }, editor))
        .toEqual([['application', 2], [null, 1]])
    })

    it('lets a Viewer key aggregate', async () => {
      const viewer = await t.givenKey({ user: 'viewer@acme.test', type: 'Viewer' })
      expect((await analytics({}, viewer)).data).toEqual([{ group: {}, measures: { count: 7 } }])
    })

    it.each<[string, unknown, string, string]>([
      ['sum on a text property', { measures: [{ type: 'sum', field: 'properties.owner' }] }, 'invalid_request', '/measures/0/field'],
      ['average on a select', { measures: [{ type: 'count' }, { type: 'average', field: 'properties.environment' }] }, 'invalid_request', '/measures/1/field'],
      // CONTRACT §7: "sum/average only on number and integer properties (400 otherwise)".
      ['sum on a currency property', { measures: [{ type: 'sum', field: 'properties.price' }] }, 'invalid_request', '/measures/0/field'],
      ['average on a percentage property', { measures: [{ type: 'average', field: 'properties.uptime' }] }, 'invalid_request', '/measures/0/field'],
      ['sum on a score property', { measures: [{ type: 'count' }, { type: 'sum', field: 'properties.rating' }] }, 'invalid_request', '/measures/1/field'],
      ['sum on a system field', { measures: [{ type: 'sum', field: 'created_at' }] }, 'invalid_request', '/measures/0/field'],
      ['an unknown group field', { group_by: ['colour'] }, 'invalid_request', '/group_by/0'],
      ['created_at without an interval', { group_by: ['created_at'] }, 'invalid_request', '/group_by/0'],
      ['an unknown member', { measures: [{ type: 'count' }], order_by: 'count' }, 'invalid_request', '/order_by'],
      ['a filter on an unknown field', { filter: { and: [{ field: 'colour', operator: 'equals', value: 'x' }] } }, 'invalid_filter', '/filter/and/0/field'],
      ['21 measures', { measures: Array.from({ length: 21 }, (_, i) => ({ type: 'count', as: `c${i}` })) }, 'invalid_request', '/measures'],
      // PostgreSQL takes at most 1,664 columns in a statement: this answered 500.
      ['5,000 measures', { measures: Array.from({ length: 5000 }, (_, i) => ({ type: 'sum', field: 'properties.cost', as: `m${i}` })) }, 'invalid_request', '/measures'],
    ])('rejects %s with 400 and a pointer', async (_, body, code, pointer) => {
      const res = await t.request('POST', '/api/v1/analytics/assets', { body })
      expect(res.status).toBe(400)
      expect(res.body.errors).toEqual([{ status: '400', code, detail: expect.any(String), source: { pointer } }])
    })

    it('refuses a filter of 40,000 nodes that are no nodes at once (its schema check took 24 s, the event loop held)', async () => {
      const started = Date.now()
      const res = await t.request('POST', '/api/v1/analytics/assets', { body: { filter: { and: Array(40_000).fill(1) } } })
      expect(Date.now() - started).toBeLessThan(5000)
      expect([res.status, res.body.errors.length, res.body.errors[0].code, res.body.errors[0].source]).toEqual([400, 1, 'invalid_filter', { pointer: '/filter/and/0' }])
    })
  })

  describe(`${store}: POST /analytics/assets, empty values and multi-select distinct counts`, () => {
    let t: TestApp
    // Owners: two values, then "", null and missing, which are all empty (CONTRACT §4).
    const EMPTIES = [
      { name: 'e1', properties: { hostname: 'e1', environment: 'prod', owner: 'Ann', tags: ['pci', 'gdpr'], cost: 10 } },
      { name: 'e2', properties: { hostname: 'e2', environment: 'prod', owner: 'bob', tags: ['pci'], cost: 20 } },
      { name: 'e3', properties: { hostname: 'e3', environment: 'dev', owner: '', tags: [], cost: 30 } },
      { name: 'e4', properties: { hostname: 'e4', environment: 'dev', owner: null, tags: ['legacy'], cost: 40 } },
      { name: 'e5', properties: { hostname: 'e5', environment: 'dev' } },
    ]

    beforeAll(async () => {
      t = await createTestApp(store)
      for (const asset of EMPTIES) {
        const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', ...asset } })
        expect(res.status, JSON.stringify(res.body)).toBe(201)
      }
    })
    afterAll(async () => t.close())

    const analytics = async (body: unknown) => {
      const res = await t.request('POST', '/api/v1/analytics/assets', { body })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body
    }
    const named = (name: string) => ({ field: 'name', operator: 'equals', value: name })

    it('puts "" in the null group with missing and null values', async () => {
      expect((await analytics({ group_by: ['properties.owner'] })).data).toEqual([
        { group: { 'properties.owner': 'Ann' }, measures: { count: 1 } },
        { group: { 'properties.owner': 'bob' }, measures: { count: 1 } },
        { group: { 'properties.owner': null }, measures: { count: 3 } },
      ])
    })

    it('adds up sums and averages of "", null and missing alike in the null group', async () => {
      const measures = [{ type: 'count' }, { type: 'sum', field: 'properties.cost', as: 'sum' }, { type: 'average', field: 'properties.cost', as: 'avg' }]
      expect((await analytics({ measures, group_by: ['properties.owner'] })).data).toEqual([
        { group: { 'properties.owner': 'Ann' }, measures: { count: 1, sum: 10, avg: 10 } },
        { group: { 'properties.owner': 'bob' }, measures: { count: 1, sum: 20, avg: 20 } },
        { group: { 'properties.owner': null }, measures: { count: 3, sum: 70, avg: 35 } },
      ])
    })

    it('counts a value held by "", null and missing rows of the null group once', async () => {
      const environments = { type: 'count_distinct', field: 'properties.environment', as: 'environments' }
      expect((await analytics({ measures: [{ type: 'count' }, environments], group_by: ['properties.owner'] })).data).toEqual([
        { group: { 'properties.owner': 'Ann' }, measures: { count: 1, environments: 1 } },
        { group: { 'properties.owner': 'bob' }, measures: { count: 1, environments: 1 } },
        { group: { 'properties.owner': null }, measures: { count: 3, environments: 1 } },
      ])
    })

    it('puts "" in the null breakdown entry', async () => {
      expect((await analytics({ group_by: ['properties.environment'], breakdown_by: 'properties.owner' })).data).toEqual([
        { group: { 'properties.environment': 'dev' }, measures: { count: 3 }, breakdown: [{ value: null, measures: { count: 3 } }] },
        { group: { 'properties.environment': 'prod' }, measures: { count: 2 },
          breakdown: [{ value: 'Ann', measures: { count: 1 } }, { value: 'bob', measures: { count: 1 } }] },
      ])
    })

    it('does not count "" as a distinct value', async () => {
      const owners = { type: 'count_distinct', field: 'properties.owner', as: 'owners' }
      expect((await analytics({ measures: [owners] })).data).toEqual([{ group: {}, measures: { owners: 2 } }])
      expect((await analytics({ measures: [owners], group_by: ['properties.environment'] })).data).toEqual([
        { group: { 'properties.environment': 'dev' }, measures: { owners: 0 } },
        { group: { 'properties.environment': 'prod' }, measures: { owners: 2 } },
      ])
      expect((await analytics({ filter: named('e3'), measures: [{ type: 'count' }, owners] })).data).toEqual([{ group: {}, measures: { count: 1, owners: 0 } }])
    })

    it('counts the distinct options of a multi-select, not the distinct sets', async () => {
      const tags = { type: 'count_distinct', field: 'properties.tags', as: 'tags' }
      expect((await analytics({ measures: [tags] })).data).toEqual([{ group: {}, measures: { tags: 3 } }])
      expect((await analytics({ filter: named('e1'), measures: [tags] })).data).toEqual([{ group: {}, measures: { tags: 2 } }])
      expect((await analytics({ filter: named('e3'), measures: [tags] })).data).toEqual([{ group: {}, measures: { tags: 0 } }])
      expect((await analytics({ filter: named('e5'), measures: [tags] })).data).toEqual([{ group: {}, measures: { tags: 0 } }])
    })

    it('counts each asset once in the other measures beside a multi-select distinct count', async () => {
      const measures = [{ type: 'count' }, { type: 'count_distinct', field: 'properties.tags', as: 'tags' },
        { type: 'sum', field: 'properties.cost', as: 'cost' }, { type: 'average', field: 'properties.cost', as: 'avg' }]
      expect((await analytics({ measures, group_by: ['properties.environment'] })).data).toEqual([
        { group: { 'properties.environment': 'dev' }, measures: { count: 3, tags: 1, cost: 70, avg: 35 } },
        { group: { 'properties.environment': 'prod' }, measures: { count: 2, tags: 2, cost: 30, avg: 15 } },
      ])
      // Two distinct fields: the other form, same answers.
      const both = [...measures, { type: 'count_distinct', field: 'properties.owner', as: 'owners' }]
      expect((await analytics({ measures: both })).data).toEqual([{ group: {}, measures: { count: 5, tags: 3, cost: 100, avg: 25, owners: 2 } }])
      expect((await analytics({ measures: both, group_by: ['properties.tags'] })).data).toEqual([
        { group: { 'properties.tags': 'gdpr' }, measures: { count: 1, tags: 2, cost: 10, avg: 10, owners: 1 } },
        { group: { 'properties.tags': 'legacy' }, measures: { count: 1, tags: 1, cost: 40, avg: 40, owners: 0 } },
        { group: { 'properties.tags': 'pci' }, measures: { count: 2, tags: 2, cost: 30, avg: 15, owners: 2 } },
        { group: { 'properties.tags': null }, measures: { count: 2, tags: 0, cost: 30, avg: 30, owners: 0 } },
      ])
    })

    it('counts distinct options in each breakdown entry', async () => {
      const body = await analytics({ measures: [{ type: 'count' }, { type: 'count_distinct', field: 'properties.tags', as: 'tags' }], breakdown_by: 'properties.environment' })
      expect(body.data).toEqual([{ group: {}, measures: { count: 5, tags: 3 },
        breakdown: [{ value: 'dev', measures: { count: 3, tags: 1 } }, { value: 'prod', measures: { count: 2, tags: 2 } }] }])
    })
  })
}

/** A key that one asset type defines as a select and another as a multi-select (CONTRACT §7: one group per option). */
for (const store of STORES) {
  describe(`${store}: analytics of a key that is a select on one type and a multi-select on another`, () => {
    let t: TestApp
    beforeAll(async () => {
      const types = [
        { key: 'rack', name: 'Rack', properties: [{ key: 'kind', type: 'select', options: ['a', 'b', 'c'] }] },
        { key: 'cable', name: 'Cable', properties: [{ key: 'kind', type: 'multi_select', options: ['a', 'b', 'c'] }] },
      ]
      t = await createTestApp(store, { ...ACME, metamodel: { ...ACME.metamodel, asset_types: [...ACME.metamodel.asset_types, ...types] } })
      const items = [
        ['rack', 'r1', 'a'], ['rack', 'r2', 'c'], ['rack', 'r3', undefined],
        ['cable', 'c1', ['b', 'a']], ['cable', 'c2', ['a']], ['cable', 'c3', []],
      ].map(([type, name, kind]) => ({ asset_type_key: type, name, properties: kind === undefined ? {} : { kind } }))
      expect((await t.request('POST', '/api/v1/bulk/assets', { body: items })).status).toBe(201)
    })
    afterAll(async () => t.close())

    const both = { field: 'asset_type_key', operator: 'in', value: ['rack', 'cable'] }

    it('groups by option, a multi-select\'s asset once per option it holds, and counts distinct options', async () => {
      const grouped = await t.request('POST', '/api/v1/analytics/assets', { body: { filter: both, group_by: ['properties.kind'] } })
      expect(grouped.body.data).toEqual([
        { group: { 'properties.kind': 'a' }, measures: { count: 3 } },
        { group: { 'properties.kind': 'b' }, measures: { count: 1 } },
        { group: { 'properties.kind': 'c' }, measures: { count: 1 } },
        { group: { 'properties.kind': null }, measures: { count: 2 } },
      ])
      const counted = await t.request('POST', '/api/v1/analytics/assets', { body: { filter: both, measures: [{ type: 'count' }, { type: 'count_distinct', field: 'properties.kind' }], breakdown_by: 'properties.kind' } })
      expect(counted.body.data).toEqual([{
        group: {}, measures: { count: 6, 'count_distinct:properties.kind': 3 },
        breakdown: [
          // The options the entry's assets hold: c1 holds b and a.
          { value: 'a', measures: { count: 3, 'count_distinct:properties.kind': 2 } },
          { value: 'b', measures: { count: 1, 'count_distinct:properties.kind': 2 } },
          { value: 'c', measures: { count: 1, 'count_distinct:properties.kind': 1 } },
          { value: null, measures: { count: 2, 'count_distinct:properties.kind': 0 } },
        ],
      }])
    })
  })
}
