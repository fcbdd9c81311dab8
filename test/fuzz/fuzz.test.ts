import fc from 'fast-check'
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/**
 * Probing every route of the OpenAPI document with hostile requests (issue 16): malformed JSON,
 * wrong types, huge numbers, deep nesting, odd Unicode, NUL, overlong strings, odd filter[…] /
 * page[…] / sort / include, bad composite keys, header abuse; with a valid Admin key and with
 * none or a broken one. Any 5xx, an error body outside the CONTRACT envelope, a stack trace or SQL
 * text fails, and fast-check prints the reproducer (seed, path and the request).
 *
 * KBIS_FUZZ_RUNS sets the number of requests per store (2,000 by default; `npm run fuzz`: 10,000).
 */
const RUNS = Number(process.env.KBIS_FUZZ_RUNS ?? 2_000)

interface Operation {
  method: string
  path: string
  hasBody: boolean
}

interface FuzzRequest {
  method: string
  url: string
  headers: Record<string, string>
  payload?: string
}

const LEAK = /syntax error at or near|relation "[^"]*" does not exist|column "[^"]*" does not exist|violates (unique|foreign key|check|not-null) constraint|invalid input syntax for|SQLSTATE|\bat (async )?[\w.<>]+ \(|node_modules|\.ts:\d+:\d+|\.js:\d+:\d+|TypeError|RangeError|ReferenceError|Cannot read propert/

/** Percent-encodes any string, lone surrogates included (as the bytes of an invalid UTF-8 sequence). */
const enc = (text: string): string => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, '\u0001')).replaceAll('%01', '%ED%A0%80')
/** As typed into a URL: printable ASCII stays as it is (raw `[`, `%`, `'`…), the rest is encoded. */
const raw = (text: string): string => (/^[\x21-\x7e]*$/.test(text) ? text : enc(text))

const weirdText = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', '\u202e', '\ufeff', '💥', 'é'.normalize('NFD'), '%', '%00', '%zz', '..', '../..',
    "x'--", '" OR 1=1', '\\', '$1', '*', ':', '::', 'server:hostname:', 'server:hostname:web-01', 'note', 'a'.repeat(600), 'x'.repeat(70_000)),
)
const weirdNumber = fc.oneof(
  fc.integer(), fc.double(), fc.constantFrom(0, -1, 1e308, -1e308, 2 ** 53 + 1, Number.MAX_SAFE_INTEGER, 5e-324, 101, 10_001),
)
const jsonish: fc.Arbitrary<unknown> = fc.oneof(
  { depthSize: 'small' },
  fc.jsonValue({ maxDepth: 4 }),
  weirdText, weirdNumber, fc.boolean(), fc.constant(null),
  fc.array(weirdText, { maxLength: 4 }),
  fc.dictionary(weirdText, weirdText, { maxKeys: 4 }),
)

const FIELDS = ['name', 'id', 'asset_type_key', 'access_domain_key', 'created_at', 'updated_at', 'properties.hostname', 'properties.cpu_count', 'properties.tags',
  'properties.purchased_on', 'properties.environment', 'properties.nope', 'relationship_type_key', 'source_asset_id', 'target_asset_id', 'source_asset.name',
  'target_asset.properties.environment', 'related_asset.name', 'direction', '', '__proto__', 'constructor']
const OPERATORS = ['equals', 'not_equals', 'contains', 'not_contains', 'starts_with', 'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals',
  'in', 'not_in', 'includes', 'not_includes', 'is_empty', 'is_not_empty', 'between', '']

const condition = fc.record({ field: fc.oneof(fc.constantFrom(...FIELDS), weirdText), operator: fc.oneof(fc.constantFrom(...OPERATORS), weirdText), value: jsonish }, { requiredKeys: [] })
const filterNode: fc.Arbitrary<unknown> = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, condition, fc.record({ and: fc.array(tie('node'), { maxLength: 3 }) }), fc.record({ or: fc.array(tie('node'), { maxLength: 3 }) }), jsonish),
})).node

/** Bodies near the real shapes (so that they pass the first checks and reach deeper code), or anything. */
function bodyArbitrary(ids: string[]): fc.Arbitrary<unknown> {
  const ref = fc.oneof(fc.constantFrom(...ids, 'server:hostname:fz-1', 'application:code:fz-app', 'server:hostname:nope', 'server:nope:x', 'nope:hostname:x', '00000000-0000-0000-0000-000000000000'), weirdText)
  const properties = fc.dictionary(fc.oneof(fc.constantFrom('hostname', 'cpu_count', 'memory_gb', 'purchased_on', 'tags', 'environment', 'managed', 'cost', 'uptime', 'rating', 'homepage', 'code', 'body'), weirdText), jsonish, { maxKeys: 5 })
  const relationships = fc.record({
    outgoing: fc.dictionary(fc.constantFrom('runs_on', 'depends_on', 'nope'), fc.record({ related_assets: fc.array(fc.record({ id: ref }), { maxLength: 3 }) })),
    incoming: fc.dictionary(fc.constantFrom('runs_on', 'depends_on'), fc.oneof(fc.record({ related_assets: fc.array(fc.record({ id: ref }), { maxLength: 3 }) }), jsonish)),
  }, { requiredKeys: [] })
  const asset = fc.record({
    asset_type_key: fc.oneof(fc.constantFrom('server', 'application', 'note', 'nope'), weirdText),
    name: fc.oneof(fc.constantFrom('fz'), weirdText),
    access_domain_key: fc.oneof(fc.constantFrom('it', 'finance', null, 'nope'), weirdText),
    properties, relationships, id: ref, client_ref: weirdText,
    relationship_type_key: fc.constantFrom('runs_on', 'depends_on', 'nope'), source_asset_id: ref, target_asset_id: ref,
  }, { requiredKeys: [] })
  const page = fc.record({ number: weirdNumber, size: weirdNumber, count: fc.oneof(fc.constant('exact'), weirdText) }, { requiredKeys: [] })
  const search = fc.record({
    filter: filterNode,
    sort: fc.array(fc.record({ field: fc.constantFrom(...FIELDS), order: fc.oneof(fc.constantFrom('asc', 'desc'), weirdText) }, { requiredKeys: [] }), { maxLength: 3 }),
    page,
    include: fc.array(fc.oneof(fc.constantFrom('relationships', 'relationships.related_asset', 'relationships.related_asset.properties', 'source_asset', 'target_asset.properties'), weirdText), { maxLength: 3 }),
    relationships: fc.record({ page, filter: filterNode, sort: jsonish }, { requiredKeys: [] }),
    measures: fc.array(fc.record({ type: fc.constantFrom('count', 'count_distinct', 'sum', 'average', 'nope'), field: fc.constantFrom(...FIELDS), as: weirdText }, { requiredKeys: [] }), { maxLength: 3 }),
    group_by: fc.array(fc.oneof(fc.constantFrom(...FIELDS), fc.record({ field: fc.constantFrom('created_at', 'related_asset_type_key'), interval: fc.constantFrom('day', 'month', 'nope'), relationship_type_key: fc.constantFrom('runs_on'), direction: fc.constantFrom('outgoing', 'x') }, { requiredKeys: [] })), { maxLength: 3 }),
    breakdown_by: fc.constantFrom(...FIELDS),
  }, { requiredKeys: [] })
  const key = fc.record({ name: weirdText, description: jsonish, permission_type: fc.constantFrom('Viewer', 'Editor', 'Admin', 'Owner', 'x'), role_keys: fc.array(fc.constantFrom('all', 'it_editor', 'nope'), { maxLength: 2 }), owner_user_id: ref }, { requiredKeys: [] })
  // An asset write with only the members a create or upsert takes: it passes the body's schema
  // and meets the metamodel's checks (unknown types, properties and options, taken unique values).
  const write = fc.record({
    asset_type_key: fc.constantFrom('server', 'application', 'note', 'nope'),
    name: fc.oneof(fc.constantFrom('fz'), weirdText),
    properties,
  }, { requiredKeys: ['name'] })
  return fc.oneof(asset, fc.array(asset, { maxLength: 4 }), write, fc.array(write, { maxLength: 4 }), search, key, jsonish)
}

/** The raw text sent: valid JSON of the body, or something broken. */
function payloadArbitrary(ids: string[]): fc.Arbitrary<string | undefined> {
  const json = bodyArbitrary(ids).map((b) => JSON.stringify(b) ?? 'null')
  return fc.oneof(
    { weight: 6, arbitrary: json },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: json.chain((text) => fc.nat({ max: Math.max(0, text.length - 1) }).map((n) => text.slice(0, n))) },
    { weight: 1, arbitrary: fc.constantFrom('', '{', '[', '{"a":}', 'nul', '{"name":"\\u0000"}', '{"name":"\\ud800"}', '[1e999]', `{"x":1${'0'.repeat(400)}}`,
      '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{}}}', `${'['.repeat(5000)}${']'.repeat(5000)}`, `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`, '\u0000', '\ufeff{}', 'true', '"x"') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  )
}

function queryArbitrary(): fc.Arbitrary<string> {
  const name = fc.oneof(
    fc.constantFrom('filter[name]', 'filter[properties.hostname]', 'filter[properties.cpu_count]', 'filter[properties.tags]', 'filter[asset_type_key]', 'filter[nope]',
      'filter[relationship_type_key]', 'filter[source_asset_id]', 'filter[id]', 'filter[]', 'filter', 'filter[name][x]', 'page[number]', 'page[size]', 'page[count]', 'page[]', 'page',
      'sort', 'include', 'relationships_page[size]', 'relationships_page[number]', 'relationships_filter[direction]', 'relationships_filter[relationship_type_key]',
      'relationships_filter[related_asset.asset_type_key]', 'relationships_sort', 'dry_run', 'merge', 'format', 'fields', '__proto__', 'constructor[prototype]'),
    weirdText,
  )
  const value = fc.oneof(fc.constantFrom('1', '0', '-1', '100', '101', '1e3', '99999999999999999999', 'NaN', 'exact', 'name', '-name', 'name,-created_at', '-', ',', 'relationships',
    'relationships,relationships.related_asset.properties', 'source_asset.properties', 'true', 'maybe', 'outgoing', 'server:hostname:fz-1', '%00', '%zz', '%E2%82'), weirdText)
  const pairs = fc.array(fc.tuple(name, value, fc.boolean()), { minLength: 1, maxLength: 5 }).map((list) =>
    list.map(([n, v, asTyped]) => (asTyped ? `${raw(n)}=${raw(v)}` : `${enc(n)}=${enc(v)}`)).join('&'))
  // Half the requests carry no query string: every route refuses a parameter it does not take
  // (400), so a request with stray parameters stops there and never reaches the body's checks.
  return fc.oneof(fc.constant(''), pairs)
}

function requestArbitrary(ops: Operation[], ids: string[], adminKey: string): fc.Arbitrary<FuzzRequest> {
  const segment = fc.oneof(
    fc.constantFrom(...ids, 'server:hostname:fz-1', 'application:code:fz-app', 'server:hostname:', 'server::x', ':::', 'note:x:y', '00000000-0000-7000-8000-000000000000',
      'not-a-uuid', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'server', 'all', 'it', '%00', '%zz', '%2F', '..', 'a'.repeat(9000)),
    weirdText.map(enc),
    weirdText.map(raw),
  )
  const auth = fc.oneof(
    { weight: 8, arbitrary: fc.constant(`Bearer ${adminKey}`) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom('Bearer', 'Bearer ', 'Basic abc', `bearer ${adminKey}`, `Bearer ${adminKey}x`, `Bearer ${adminKey.slice(0, -1)}`, 'Bearer kbis_', 'Bearer kbis__', `Bearer ${'k'.repeat(5000)}`, 'Bearer \u00e9') },
  )
  const extraHeaders = fc.record({
    'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', '', ';;;', 'application/merge-patch+json'),
    accept: fc.constantFrom('application/json', 'text/html', '*/*', 'application/yaml', 'x/y'),
    'idempotency-key': fc.oneof(fc.uuid(), fc.constantFrom('', 'x'.repeat(300))),
    'x-request-id': fc.constantFrom('abc', '', 'x'.repeat(500), 'a b\tc'),
    'x-forwarded-for': fc.constantFrom('1.2.3.4', 'not-an-ip', '::1, 10.0.0.1', ''),
    'if-none-match': fc.constantFrom('*', 'W/"x"'),
    'accept-encoding': fc.constantFrom('gzip', 'br', 'identity', 'x'),
  }, { requiredKeys: [] })
  const hostile = fc.record({
    op: fc.constantFrom(...ops),
    method: fc.option(fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS', 'HEAD'), { freq: 10 }),
    segments: fc.array(segment, { minLength: 3, maxLength: 3 }),
    query: queryArbitrary(),
    payload: payloadArbitrary(ids),
    auth,
    headers: extraHeaders,
  }).map(({ op, method, segments, query, payload, auth, headers }) => {
    let i = 0
    const path = op.path.replace(/\{[^}]+\}/g, () => segments[i++ % segments.length]!)
    const all: Record<string, string> = { ...headers }
    if (auth !== undefined) all.authorization = auth
    const m = method ?? op.method
    const request: FuzzRequest = { method: m, url: query ? `${path}?${query}` : path, headers: all }
    if (payload !== undefined && m !== 'GET' && m !== 'HEAD') request.payload = payload
    return request
  })
  // A quarter of the requests are well formed up to their JSON body: the route's own method, the
  // admin key, real ids in the path, no query string, JSON. Every route refuses what it does not
  // take at the door (a stray query parameter, a malformed header), so only such requests reach
  // the body's checks, the metamodel, the store and its constraints.
  const nearValid = fc.record({
    op: fc.constantFrom(...ops),
    ref: fc.constantFrom(...ids, 'server:hostname:fz-1', 'application:code:fz-app'),
    body: bodyArbitrary(ids),
  }).map(({ op, ref, body }): FuzzRequest => {
    const request: FuzzRequest = { method: op.method, url: op.path.replace(/\{[^}]+\}/g, ref), headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' } }
    if (op.hasBody) request.payload = JSON.stringify(body) ?? 'null'
    return request
  })
  return fc.oneof({ weight: 3, arbitrary: hostile }, { weight: 1, arbitrary: nearValid })
}

/** The failure, or null: no 5xx, the envelope on every error, no stack trace or SQL. */
function problemOf(method: string, path: string, res: { statusCode: number; headers: Record<string, unknown>; body: string }): string | null {
  if (res.statusCode >= 500) return `answered ${res.statusCode}: ${res.body.slice(0, 500)}`
  if (LEAK.test(res.body)) return `the body leaks internals: ${res.body.slice(0, 500)}`
  // A HEAD answer carries the headers of the GET, never a body.
  if (res.statusCode >= 400 && method !== 'HEAD') {
    let body: { errors?: { status?: unknown; code?: unknown; detail?: unknown }[] }
    try {
      body = JSON.parse(res.body)
    } catch {
      return `error ${res.statusCode} not JSON: ${res.body.slice(0, 200)}`
    }
    const errors = body.errors
    if (!Array.isArray(errors) || errors.length === 0) return `error ${res.statusCode} outside the envelope: ${res.body.slice(0, 200)}`
    for (const e of errors) {
      if (typeof e.status !== 'string' || !/^4\d\d$|^5\d\d$/.test(e.status) || typeof e.code !== 'string' || typeof e.detail !== 'string' || e.detail === '') return `malformed error entry: ${JSON.stringify(e).slice(0, 300)}`
    }
    // A bulk answer lists items failing in several ways, each entry with its own status (CONTRACT
    // §1, §5); the answer takes the status of one of them. Any other answer has one status throughout.
    const statuses = new Set(errors.map((e) => e.status))
    if (!statuses.has(String(res.statusCode))) return `no error entry carries the answer's status ${res.statusCode}: ${res.body.slice(0, 300)}`
    if (statuses.size > 1 && !/^\/api\/v1\/bulk\//.test(path)) return `error entries of several statuses outside a bulk answer: ${res.body.slice(0, 300)}`
  }
  return null
}

/**
 * The body as a client reads it: a fuzzed `accept-encoding` may get a compressed answer (over 1 KiB).
 * A HEAD answer has no body, whatever its Content-Encoding says of GET's (RFC 9110 §9.3.2).
 */
function decoded(encoding: string | string[] | undefined, raw: Buffer): string {
  if (raw.length === 0) return ''
  if (encoding === 'gzip') return gunzipSync(raw).toString('utf8')
  if (encoding === 'br') return brotliDecompressSync(raw).toString('utf8')
  if (encoding === 'deflate') return inflateSync(raw).toString('utf8')
  return raw.toString('utf8')
}

for (const store of STORES) {
  describe(`${store}: fuzzing every route of the OpenAPI document`, () => {
    let t: TestApp
    let ops: Operation[] = []
    let ids: string[] = []
    beforeAll(async () => {
      t = await createTestApp(store)
      const doc = (await t.request('GET', '/api/v1/openapi/base.json', { key: null })).body as { paths: Record<string, Record<string, { requestBody?: unknown }>> }
      ops = Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods).filter(([m]) => ['get', 'post', 'patch', 'put', 'delete'].includes(m)).map(([m, op]) => ({ method: m.toUpperCase(), path, hasBody: op.requestBody !== undefined })))
      const seeded = await t.request('POST', '/api/v1/bulk/assets', {
        body: [
          { asset_type_key: 'server', name: 'fz-1', access_domain_key: 'it', properties: { hostname: 'fz-1', cpu_count: 4, tags: ['pci'], environment: 'prod' } },
          { asset_type_key: 'application', name: 'fz-app', properties: { code: 'fz-app', tier: 'gold' }, relationships: { outgoing: { runs_on: { related_assets: [{ id: 'server:hostname:fz-1' }] } } } },
          { asset_type_key: 'note', name: 'fz-note', access_domain_key: 'finance' },
        ],
      })
      expect(seeded.status).toBe(201)
      ids = seeded.body.data.map((d: { id: string }) => d.id)
    })
    afterAll(async () => t.close())

    it('finds the routes', () => {
      expect(ops.length).toBeGreaterThan(20)
      for (const path of ['/api/v1/assets', '/api/v1/assets/{id}', '/api/v1/search/assets', '/api/v1/bulk/assets', '/api/v1/analytics/assets', '/api/v1/api-keys/{id}']) {
        expect(ops.some((op) => op.path === path), path).toBe(true)
      }
    })

    it(`answers ${RUNS} hostile requests without a 5xx, always in the envelope, leaking nothing`, async () => {
      const seen = new Map<number, number>()
      await fc.assert(
        fc.asyncProperty(requestArbitrary(ops, ids, t.adminKey), async (request) => {
          const res = await t.app.inject({ method: request.method as 'GET', url: request.url, headers: request.headers, ...(request.payload !== undefined ? { payload: request.payload } : {}) })
          seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1)
          const problem = problemOf(request.method, request.url.split('?')[0]!, { statusCode: res.statusCode, headers: res.headers, body: decoded(res.headers['content-encoding'], res.rawPayload) })
          if (problem) throw new Error(`${request.method} ${request.url.slice(0, 300)} → ${problem}`)
        }),
        { numRuns: RUNS, ...(process.env.KBIS_FUZZ_SEED ? { seed: Number(process.env.KBIS_FUZZ_SEED) } : {}) },
      )
      // The probe reached past the door: successes and several kinds of refusal.
      expect([...seen.keys()].filter((s) => s < 300).length).toBeGreaterThan(0)
      expect([...seen.keys()].filter((s) => s >= 400).length, JSON.stringify([...seen].sort())).toBeGreaterThan(3)
    }, 600_000)
  })
}
