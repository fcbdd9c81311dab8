import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { expectOneRecordPages } from '../helpers/pages.js'
import { ACME } from '../helpers/fixtures.js'

for (const store of STORES) {
  describe(`${store}: GET /assets list queries`, () => {
    let t: TestApp
    const names = ['delta', 'alpha', 'charlie', 'bravo', 'echo']
    beforeAll(async () => {
      t = await createTestApp(store)
      for (const [i, name] of names.entries()) {
        const res = await t.request('POST', '/api/v1/assets', {
          body: {
            asset_type_key: 'server', name, access_domain_key: i % 2 === 0 ? 'it' : 'finance',
            properties: { hostname: name, environment: i < 2 ? 'prod' : 'dev', cpu_count: (i + 1) * 4, tags: i === 0 ? ['pci', 'gdpr'] : ['legacy'], managed: i % 2 === 0, purchased_on: `2024-0${i + 1}-15` },
          },
        })
        expect(res.status).toBe(201)
      }
      expect((await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'application', name: 'crm', properties: { code: 'crm' } } })).status).toBe(201)
    })
    afterAll(async () => t.close())

    const list = async (query: string) => t.request('GET', `/api/v1/assets${query}`)
    const namesOf = (body: { data: { name: string }[] }) => body.data.map((a) => a.name)

    it('orders by created_at then id by default, with the list envelope and links', async () => {
      const res = await list('')
      expect(res.status).toBe(200)
      expect(namesOf(res.body)).toEqual([...names, 'crm'])
      expect(res.body.meta).toEqual({ page: { number: 1, size: 50, total_items: 6, total_items_exact: true, total_pages: 1 } })
      expect(res.body.links).toEqual({
        self: '/api/v1/assets?page[number]=1&page[size]=50',
        first: '/api/v1/assets?page[number]=1&page[size]=50',
        prev: null,
        next: null,
        last: '/api/v1/assets?page[number]=1&page[size]=50',
      })
    })

    it('filters by equality on type, name, domain and properties (AND)', async () => {
      expect(namesOf((await list('?filter[asset_type_key]=application')).body)).toEqual(['crm'])
      expect(namesOf((await list('?filter[properties.environment]=prod')).body)).toEqual(['delta', 'alpha'])
      expect(namesOf((await list('?filter[properties.environment]=dev&filter[access_domain_key]=it')).body)).toEqual(['charlie', 'echo'])
      expect(namesOf((await list('?filter[properties.cpu_count]=12')).body)).toEqual(['charlie'])
      expect(namesOf((await list('?filter[properties.managed]=true')).body)).toEqual(['delta', 'charlie', 'echo'])
      expect(namesOf((await list('?filter[properties.purchased_on]=2024-02-15')).body)).toEqual(['alpha'])
      expect(namesOf((await list('?filter[name]=bravo')).body)).toEqual(['bravo'])
    })

    it('lists the assets without an access domain for filter[access_domain_key]= (empty), in lists and exports', async () => {
      // crm is the one asset created without a domain.
      const none = await list('?filter[access_domain_key]=')
      expect(namesOf(none.body)).toEqual(['crm'])
      expect(none.body.meta.page.total_items).toBe(1)
      expect(namesOf((await list('?filter[access_domain_key]=&filter[asset_type_key]=server')).body)).toEqual([])
      const exported = await t.app.inject({ method: 'GET', url: '/api/v1/export/assets?format=ndjson&filter[access_domain_key]=', headers: { authorization: `Bearer ${t.adminKey}` } })
      expect(exported.statusCode).toBe(200)
      expect(exported.body.trim().split('\n').map((line) => JSON.parse(line).name)).toEqual(['crm'])
    })

    it('matches a multi-select filter when the array includes the value', async () => {
      expect(namesOf((await list('?filter[properties.tags]=gdpr')).body)).toEqual(['delta'])
      expect(namesOf((await list('?filter[properties.tags]=legacy')).body)).toEqual(['alpha', 'charlie', 'bravo', 'echo'])
    })

    it('rejects unknown filter fields and badly typed values with 400 invalid_filter', async () => {
      for (const q of ['?filter[colour]=red', '?filter[properties.nope]=1', '?filter[properties.cpu_count]=many', '?filter[properties.purchased_on]=2024-01-01T00:00:00Z']) {
        const res = await list(q)
        expect(res.status, q).toBe(400)
        expect(res.body.errors[0].code, q).toBe('invalid_filter')
      }
      // A fraction is no value of an integer or a score (CONTRACT §4: a value of the wrong type), as writing one is not.
      const fraction = await list('?filter[properties.cpu_count]=1.5')
      expect([fraction.status, fraction.body.errors]).toEqual([400, [{ status: '400', code: 'invalid_filter',
        detail: 'properties.cpu_count needs an integer, got 1.5', source: { parameter: 'filter[properties.cpu_count]' } }]])
      expect((await list('?filter[properties.rating]=2.5')).status).toBe(400)
      expect((await list('?filter[properties.memory_gb]=1.5')).status).toBe(200)
      // An integer a 64-bit float cannot hold would be read as another one (…993 as …992): refused, as in a search body.
      const inexact = await list('?filter[properties.cpu_count]=9007199254740993')
      expect([inexact.status, inexact.body.errors[0].code, inexact.body.errors[0].detail]).toEqual([400, 'invalid_filter',
        'properties.cpu_count needs a number that can be kept exactly, got 9007199254740993: integers beyond ±9007199254740991 (2^53 − 1) lose digits'])
      expect((await list('?filter[properties.cpu_count]=9007199254740991')).status).toBe(200)
      // Kept as another number too: 2^60 (a float, written back as 1152921504606847000).
      expect((await list('?filter[properties.cpu_count]=1152921504606846976')).status).toBe(400)
      // Kept as written: 1.2e25 written out in full.
      expect((await list('?filter[properties.cpu_count]=12000000000000000000000000')).status).toBe(200)
    })

    it('sorts ascending and descending on several fields, numbers numerically', async () => {
      expect(namesOf((await list('?filter[asset_type_key]=server&sort=name')).body)).toEqual(['alpha', 'bravo', 'charlie', 'delta', 'echo'])
      expect(namesOf((await list('?filter[asset_type_key]=server&sort=-name')).body)).toEqual(['echo', 'delta', 'charlie', 'bravo', 'alpha'])
      expect(namesOf((await list('?filter[asset_type_key]=server&sort=-properties.cpu_count')).body)).toEqual(['echo', 'bravo', 'charlie', 'alpha', 'delta'])
      expect(namesOf((await list('?filter[asset_type_key]=server&sort=properties.environment,-name')).body)).toEqual(['echo', 'charlie', 'bravo', 'delta', 'alpha'])
    })

    it('rejects unknown sort fields with 400 invalid_sort', async () => {
      const res = await list('?sort=colour')
      expect(res.status).toBe(400)
      expect(res.body.errors[0].code).toBe('invalid_sort')
    })

    it('pages with page[number] and page[size]; a page past the end is empty', async () => {
      const p2 = await list('?sort=name&page[number]=2&page[size]=2')
      expect(namesOf(p2.body)).toEqual(['charlie', 'crm'])
      expect(p2.body.meta.page).toEqual({ number: 2, size: 2, total_items: 6, total_items_exact: true, total_pages: 3 })
      expect(p2.body.links.prev).toBe('/api/v1/assets?sort=name&page[number]=1&page[size]=2')
      expect(p2.body.links.next).toBe('/api/v1/assets?sort=name&page[number]=3&page[size]=2')
      expect(p2.body.links.last).toBe('/api/v1/assets?sort=name&page[number]=3&page[size]=2')
      const past = await list('?page[number]=9&page[size]=2')
      expect(past.status).toBe(200)
      expect(past.body.data).toEqual([])
      expect(past.body.links.next).toBeNull()
      // However far: any page number written exactly (up to 2^53 - 1).
      for (const number of [1_000_000_001, 99_999_999_999, Number.MAX_SAFE_INTEGER]) {
        const far = await list(`?sort=name&page[number]=${number}&page[size]=100`)
        expect(far.status, String(number)).toBe(200)
        expect(far.body.data).toEqual([])
        expect(far.body.meta.page).toEqual({ number, size: 100, total_items: 6, total_items_exact: true, total_pages: 1 })
        expect(far.body.links.self).toBe(`/api/v1/assets?sort=name&page[number]=${number}&page[size]=100`)
      }
      const beyond = await list('?page[number]=9007199254740992')
      expect(beyond.status).toBe(400)
      expect(beyond.body.errors[0]).toMatchObject({ status: '400', code: 'invalid_page', source: { parameter: 'page[number]' } })
    })

    it('rejects page[size] outside 1..100 and page[number] < 1 with 400 invalid_page', async () => {
      for (const q of ['?page[size]=101', '?page[size]=0', '?page[number]=0', '?page[number]=abc', '?page[size]=1.5']) {
        const res = await list(q)
        expect(res.status, q).toBe(400)
        expect(res.body.errors[0]).toMatchObject({ status: '400', code: 'invalid_page' })
      }
      expect((await list('?page[size]=100')).status).toBe(200)
    })

    it('takes page numbers and sizes in decimal digits only (0x10, 1e1, a sign or a space are refused)', async () => {
      for (const q of ['?page[size]=0x10', '?page[size]=0b11', '?page[size]=1e1', '?page[number]=1e3', '?page[size]=%205', '?page[size]=%2B5', '?page[size]=', '?relationships_page[size]=0x5&include=relationships']) {
        const res = await list(q)
        expect(res.status, q).toBe(400)
        const parameter = q.slice(1, q.indexOf('='))
        expect(res.body.errors, q).toEqual([{ status: '400', code: 'invalid_page', detail: `${parameter} must be a whole number written in digits, such as 10`, source: { parameter } }])
      }
      expect((await list('?page[size]=016')).body.meta.page.size).toBe(16)
    })

    it('rejects unknown filter and page members with their own codes', async () => {
      const filter = await list('?relationships_filter[colour]=red')
      expect(filter.body.errors).toEqual([
        { status: '400', code: 'invalid_filter', detail: 'unknown filter field relationships_filter[colour]', source: { parameter: 'relationships_filter[colour]' } },
      ])
      expect((await list('?page[offset]=3')).body.errors[0].code).toBe('invalid_page')
    })

    it('answers a query parameter of a family the route does not take (page[…] on a search, sort on an export) as a malformed request', async () => {
      const search = await t.request('POST', '/api/v1/search/assets?page[size]=1', { body: {} })
      expect(search.body.errors).toEqual([{ status: '400', code: 'invalid_request', detail: 'unknown query parameter page[size]', source: { parameter: 'page[size]' } }])
      const exported = await t.request('GET', '/api/v1/export/assets?format=ndjson&sort=name')
      expect(exported.body.errors).toEqual([{ status: '400', code: 'invalid_request', detail: 'unknown query parameter sort', source: { parameter: 'sort' } }])
    })

    it('answers each record of a page as GET /assets/{id} answers it, whatever its text and numbers hold', async () => {
      const tricky = 'q"uote \\ back\nline\ttab \u0001ctl \u007f del </script> \u2028 é 日本 😀'
      const created = await t.request('POST', '/api/v1/assets', {
        body: {
          asset_type_key: 'server', name: `zz ${tricky}`,
          properties: { hostname: 'zz-tricky', owner: tricky, notes: '', cpu_count: 9007199254740991, memory_gb: 0.1, cost: 1234.5, uptime: 1e-7, rating: 4, tags: [], managed: false, homepage: 'https://example.test/a?b=c&d=e' },
        },
      })
      expect(created.body.errors).toBeUndefined()
      const id = created.body.data.id as string
      const one = await t.request('GET', `/api/v1/assets/${id}`)
      expect(one.body.data.properties.uptime).toBe(1e-7)
      expect(one.body.data.access_domain_key).toBeNull()
      const listed = await list('?filter[properties.hostname]=zz-tricky')
      const searched = await t.request('POST', '/api/v1/search/assets', { body: { filter: { field: 'properties.hostname', operator: 'equals', value: 'zz-tricky' } } })
      expectOneRecordPages(listed, searched, one.body.data)
      expect((await list('?filter[properties.hostname]=nothing')).body.data).toEqual([])
      expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
    })

    it('rejects unknown query parameters with 400 invalid_request', async () => {
      const res = await list('?colour=red')
      expect(res.status).toBe(400)
      expect(res.body.errors[0]).toMatchObject({ code: 'invalid_request', source: { parameter: 'colour' } })
    })
  })
}

/** GET lists (jsonb) and search (the typed projection) sort a property alike, empty values last. */
for (const store of STORES) {
  describe(`${store}: property sorts, list and search alike`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
      const servers: [string, Record<string, unknown>][] = [
        ['s-a', { tags: ['pci', 'gdpr'], owner: '' }], ['s-b', { tags: ['pci'], owner: 'bob' }], ['s-c', { tags: [], owner: 'Ann' }],
        ['s-d', { tags: ['gdpr', 'legacy'] }], ['s-e', { owner: 'ann' }], ['s-f', { tags: ['legacy'], owner: 'zed' }],
      ]
      const res = await t.request('POST', '/api/v1/bulk/assets', { body: servers.map(([hostname, properties]) => ({ asset_type_key: 'server', name: hostname, properties: { hostname, ...properties } })) })
      expect(res.status).toBe(201)
    })
    afterAll(async () => t.close())

    const names = (body: { data: { name: string }[] }) => body.data.map((a) => a.name)
    it.each([
      ['properties.tags', ['s-d', 's-f', 's-b', 's-a', 's-c', 's-e']],
      ['-properties.tags', ['s-c', 's-e', 's-a', 's-b', 's-f', 's-d']],
      ['properties.owner', ['s-c', 's-e', 's-b', 's-f', 's-a', 's-d']],
      ['-properties.owner', ['s-a', 's-d', 's-f', 's-b', 's-e', 's-c']],
    ])('sort=%s: element by element for multi-selects, byte order for text, "" and [] with the empty values', async (sort, expected) => {
      const field = sort.replace(/^-/, '')
      // Missing, "" and [] are all empty: among them the id decides, ascending (the order of creation).
      const listed = await t.request('GET', `/api/v1/assets?filter[asset_type_key]=server&sort=${sort}`)
      const searched = await t.request('POST', '/api/v1/search/assets', {
        body: { filter: { field: 'asset_type_key', operator: 'equals', value: 'server' }, sort: [{ field, order: sort.startsWith('-') ? 'desc' : 'asc' }] },
      })
      expect(names(listed.body)).toEqual(expected)
      expect(names(searched.body)).toEqual(expected)
    })
  })
}

for (const store of STORES) {
  describe(`${store}: list filters on a property key two asset types define differently`, () => {
    let t: TestApp
    beforeAll(async () => {
      // tier: a select on application, a multi-select on note; owner: text on server and
      // application, an integer on note.
      const setup = structuredClone(ACME)
      setup.metamodel.asset_types.find((type) => type.key === 'note')!.properties.push(
        { key: 'tier', type: 'multi_select', options: ['gold', 'platinum'] } as never, { key: 'owner', type: 'integer' } as never)
      t = await createTestApp(store, setup)
    })
    afterAll(async () => t.close())

    const create = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string
    const ids = async (query: string) => (await t.request('GET', `/api/v1/assets?${query}&sort=name`)).body.data.map((a: { id: string }) => a.id)

    it('matches each asset as its own type reads the value (CONTRACT §3: a multi-select matches when it includes it)', async () => {
      const app = await create({ asset_type_key: 'application', name: 'a1', properties: { code: 'a1', tier: 'gold', owner: '5' } })
      const gold = await create({ asset_type_key: 'note', name: 'n1', properties: { tier: ['gold'], owner: 5 } })
      const platinum = await create({ asset_type_key: 'note', name: 'n2', properties: { tier: ['platinum', 'gold'], owner: 7 } })
      const server = await create({ asset_type_key: 'server', name: 's1', properties: { hostname: 's1', owner: '5' } })
      expect(await ids('filter[properties.tier]=gold')).toEqual([app, gold, platinum])
      expect(await ids('filter[asset_type_key]=note&filter[properties.tier]=platinum')).toEqual([platinum])
      expect(await ids('filter[asset_type_key]=note&filter[properties.tier]=gold')).toEqual([gold, platinum])
      expect(await ids('filter[properties.owner]=5')).toEqual([app, gold, server])
      // A value only the text reading takes.
      expect(await ids('filter[properties.owner]=five')).toEqual([])
    })

    it('sorts and groups the key as the asset types filtered for define it: notes\' integer owner numerically', async () => {
      const note = async (name: string, owner: number) => create({ asset_type_key: 'note', name, properties: { owner } })
      const [ten, minus, nine] = [await note('o10', 10), await note('o-1', -1), await note('o9', 9)]
      const byOwner = [minus, nine, ten]
      const list = async (sort: string) => (await t.request('GET', `/api/v1/assets?filter[asset_type_key]=note&sort=${sort}`)).body.data
        .map((a: { id: string }) => a.id).filter((id: string) => byOwner.includes(id))
      expect(await list('properties.owner')).toEqual(byOwner)
      expect(await list('-properties.owner')).toEqual([...byOwner].reverse())
      const search = async (filter: object) => (await t.request('POST', '/api/v1/search/assets', {
        body: { filter, sort: [{ field: 'properties.owner', order: 'asc' }], page: { size: 100 } },
      })).body.data.map((a: { id: string }) => a.id).filter((id: string) => byOwner.includes(id))
      expect(await search({ field: 'asset_type_key', operator: 'equals', value: 'note' })).toEqual(byOwner)
      expect(await search({ and: [{ field: 'asset_type_key', operator: 'in', value: ['note'] }, { field: 'name', operator: 'starts_with', value: 'o' }] })).toEqual(byOwner)
      // Unrestricted, the key has two kinds and sorts by its text form ("-1" < "10" < "9").
      expect(await search({ field: 'name', operator: 'starts_with', value: 'o' })).toEqual([minus, ten, nine])
      const groups = (await t.request('POST', '/api/v1/analytics/assets', {
        body: { filter: { field: 'asset_type_key', operator: 'equals', value: 'note' }, group_by: ['properties.owner'] },
      })).body.data.map((row: { group: { 'properties.owner': unknown } }) => row.group['properties.owner'])
      expect(groups).toEqual([-1, 5, 7, 9, 10])
    })
  })
}
