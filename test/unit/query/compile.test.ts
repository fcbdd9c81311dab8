import { describe, expect, it } from 'vitest'
import { Params } from '../../../src/store/sql.js'
import { parseFilter } from '../../../src/query/parse.js'
import { parseListFilters, resolveListFilters } from '../../../src/query/list.js'
import { andNodes, resolveFilter, sqlNode, type ResolvedNode } from '../../../src/query/resolve.js'
import { compileFilter, propertyContains, propertyExpr } from '../../../src/query/compile.js'
import type { Target } from '../../../src/query/fields.js'
import { ORG_ID, givenMetamodel } from './fixtures.js'

const mm = givenMetamodel()
const UUID1 = '0190b3b0-0000-7000-8000-0000000000a1'
const UUID2 = '0190b3b0-0000-7000-8000-0000000000a2'

function compile(node: ResolvedNode, alias = 'a', initial: unknown[] = []): { text: string; values: unknown[] } {
  const params = new Params(initial)
  const text = compileFilter(node, params, alias)
  return { text, values: params.values }
}

function sql(body: unknown, target: Target = 'assets', alias = target === 'assets' ? 'a' : 'r') {
  return compile(resolveFilter(parseFilter(body), target, mm), alias)
}

const c = (field: string, operator: string, value?: unknown) => ({ field, operator, value })

const N = (key: string) => `(CASE WHEN jsonb_typeof(a.properties->'${key}') = 'number' THEN (a.properties->>'${key}')::numeric END)`
const T = (key: string) => `(a.properties->>'${key}')`
const EMPTY = (key: string) => `COALESCE(a.properties->'${key}', 'null'::jsonb) IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb)`

type Row = [string, string, unknown, string, unknown[]]

describe('compileFilter: system columns', () => {
  it.each<Row>([
    ['name', 'equals', 'web', 'a."name" = $1', ['web']],
    ['name', 'not_equals', 'web', 'a."name" <> $1', ['web']],
    ['name', 'contains', 'web', `a."name" COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['%web%']],
    ['name', 'not_contains', 'web', `NOT (a."name" COLLATE "default" ILIKE $1 ESCAPE '\\')`, ['%web%']],
    ['name', 'starts_with', 'web', `a."name" COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['web%']],
    ['name', 'in', ['web', 'db'], 'a."name" = ANY($1::text[])', [['web', 'db']]],
    ['name', 'not_in', ['web'], 'NOT (a."name" = ANY($1::text[]))', [['web']]],
    ['name', 'is_empty', undefined, `(a."name" IS NULL OR a."name" = '')`, []],
    ['name', 'is_not_empty', undefined, `(a."name" IS NOT NULL AND a."name" <> '')`, []],
    ['asset_type_key', 'equals', 'server', 'a."asset_type_key" = $1', ['server']],
    ['access_domain_key', 'equals', 'it', 'a."access_domain_key" = $1', ['it']],
    ['access_domain_key', 'not_equals', 'it', `(a."access_domain_key" IS NULL OR a."access_domain_key" = '' OR a."access_domain_key" <> $1)`, ['it']],
    ['access_domain_key', 'contains', 'i', `a."access_domain_key" COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['%i%']],
    ['access_domain_key', 'not_contains', 'i', `(a."access_domain_key" IS NULL OR a."access_domain_key" = '' OR NOT (a."access_domain_key" COLLATE "default" ILIKE $1 ESCAPE '\\'))`, ['%i%']],
    ['access_domain_key', 'starts_with', 'i', `a."access_domain_key" COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['i%']],
    ['access_domain_key', 'in', ['it'], 'a."access_domain_key" = ANY($1::text[])', [['it']]],
    ['access_domain_key', 'not_in', ['it'], `(a."access_domain_key" IS NULL OR a."access_domain_key" = '' OR NOT (a."access_domain_key" = ANY($1::text[])))`, [['it']]],
    ['access_domain_key', 'is_empty', undefined, `(a."access_domain_key" IS NULL OR a."access_domain_key" = '')`, []],
    ['access_domain_key', 'is_not_empty', null, `(a."access_domain_key" IS NOT NULL AND a."access_domain_key" <> '')`, []],
    ['created_at', 'equals', '2026-01-31', 'a."created_at" = $1', ['2026-01-31T00:00:00.000Z']],
    ['created_at', 'not_equals', '2026-01-31T09:15:00Z', 'a."created_at" <> $1', ['2026-01-31T09:15:00.000Z']],
    ['created_at', 'greater_than', '2026-01-31T09:15:00Z', 'a."created_at" > $1', ['2026-01-31T09:15:00.000Z']],
    ['updated_at', 'greater_than_or_equals', '2026-01-31', 'a."updated_at" >= $1', ['2026-01-31T00:00:00.000Z']],
    ['updated_at', 'less_than', '2026-01-31', 'a."updated_at" < $1', ['2026-01-31T00:00:00.000Z']],
    ['created_at', 'less_than_or_equals', '2026-01-31', 'a."created_at" <= $1', ['2026-01-31T00:00:00.000Z']],
    ['id', 'equals', UUID1, 'a."id" = $1', [UUID1]],
    ['id', 'not_equals', UUID1, 'a."id" <> $1', [UUID1]],
    ['id', 'in', [UUID1, UUID2], 'a."id" = ANY($1::uuid[])', [[UUID1, UUID2]]],
    ['id', 'not_in', [UUID1], 'NOT (a."id" = ANY($1::uuid[]))', [[UUID1]]],
  ])('%s %s %j → %s', (field, operator, value, text, values) => {
    expect(sql(c(field, operator, value))).toEqual({ text, values })
  })

  it.each<Row>([
    ['id', 'equals', UUID1, 'r."id" = $1', [UUID1]],
    ['relationship_type_key', 'not_equals', 'runs_on', 'r."relationship_type_key" <> $1', ['runs_on']],
    ['relationship_type_key', 'starts_with', 'run', `r."relationship_type_key" COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['run%']],
    ['source_asset_id', 'in', [UUID1], 'r."source_asset_id" = ANY($1::uuid[])', [[UUID1]]],
    ['target_asset_id', 'not_equals', UUID2, 'r."target_asset_id" <> $1', [UUID2]],
    ['created_at', 'greater_than', '2026-01-31', 'r."created_at" > $1', ['2026-01-31T00:00:00.000Z']],
  ])('relationships: %s %s %j → %s', (field, operator, value, text, values) => {
    expect(sql(c(field, operator, value), 'relationships')).toEqual({ text, values })
  })
})

describe('compileFilter: properties', () => {
  it.each<Row>([
    // text kinds: text, select, unique_key
    ['properties.owner', 'equals', 'ann', 'a.properties @> $1::jsonb', ['{"owner":"ann"}']],
    ['properties.owner', 'not_equals', 'ann', 'NOT (a.properties @> $1::jsonb)', ['{"owner":"ann"}']],
    ['properties.owner', 'contains', 'an', `${T('owner')} COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['%an%']],
    ['properties.owner', 'not_contains', 'an', `(${T('owner')} IS NULL OR ${T('owner')} = '' OR NOT (${T('owner')} COLLATE "default" ILIKE $1 ESCAPE '\\'))`, ['%an%']],
    ['properties.hostname', 'starts_with', 'web-', `${T('hostname')} COLLATE "default" ILIKE $1 ESCAPE '\\'`, ['web-%']],
    ['properties.environment', 'in', ['dev', 'prod'], `${T('environment')} = ANY($1::text[])`, [['dev', 'prod']]],
    ['properties.environment', 'not_in', ['dev'], `(${T('environment')} IS NULL OR ${T('environment')} = '' OR NOT (${T('environment')} = ANY($1::text[])))`, [['dev']]],
    ['properties.environment', 'is_empty', undefined, EMPTY('environment'), []],
    ['properties.environment', 'is_not_empty', undefined, `NOT (${EMPTY('environment')})`, []],
    // number
    ['properties.cpu_count', 'equals', 16, 'a.properties @> $1::jsonb', ['{"cpu_count":16}']],
    ['properties.cpu_count', 'not_equals', 16, 'NOT (a.properties @> $1::jsonb)', ['{"cpu_count":16}']],
    ['properties.cpu_count', 'greater_than', 16, `${N('cpu_count')} > $1`, [16]],
    ['properties.cpu_count', 'greater_than_or_equals', 16, `${N('cpu_count')} >= $1`, [16]],
    ['properties.memory_gb', 'less_than', 7.5, `${N('memory_gb')} < $1`, [7.5]],
    ['properties.memory_gb', 'less_than_or_equals', -1, `${N('memory_gb')} <= $1`, [-1]],
    ['properties.cpu_count', 'in', [1, 2], `${N('cpu_count')} = ANY($1::numeric[])`, [[1, 2]]],
    ['properties.cpu_count', 'not_in', [4], `(${N('cpu_count')} IS NULL OR NOT (${N('cpu_count')} = ANY($1::numeric[])))`, [[4]]],
    ['properties.cpu_count', 'is_empty', undefined, EMPTY('cpu_count'), []],
    ['properties.cpu_count', 'is_not_empty', undefined, `NOT (${EMPTY('cpu_count')})`, []],
    // date
    ['properties.purchased_on', 'equals', '2026-01-31', 'a.properties @> $1::jsonb', ['{"purchased_on":"2026-01-31"}']],
    ['properties.purchased_on', 'not_equals', '2026-01-31', 'NOT (a.properties @> $1::jsonb)', ['{"purchased_on":"2026-01-31"}']],
    ['properties.purchased_on', 'greater_than', '2026-01-31', `${T('purchased_on')} > $1`, ['2026-01-31']],
    ['properties.purchased_on', 'greater_than_or_equals', '2026-01-31', `${T('purchased_on')} >= $1`, ['2026-01-31']],
    ['properties.purchased_on', 'less_than', '2026-01-31', `${T('purchased_on')} < $1`, ['2026-01-31']],
    ['properties.purchased_on', 'less_than_or_equals', '2026-01-31', `${T('purchased_on')} <= $1`, ['2026-01-31']],
    ['properties.purchased_on', 'in', ['2026-01-31'], `${T('purchased_on')} = ANY($1::text[])`, [['2026-01-31']]],
    ['properties.purchased_on', 'not_in', ['2026-01-31'], `(${T('purchased_on')} IS NULL OR NOT (${T('purchased_on')} = ANY($1::text[])))`, [['2026-01-31']]],
    ['properties.purchased_on', 'is_empty', undefined, EMPTY('purchased_on'), []],
    ['properties.purchased_on', 'is_not_empty', undefined, `NOT (${EMPTY('purchased_on')})`, []],
    // boolean
    ['properties.managed', 'equals', true, 'a.properties @> $1::jsonb', ['{"managed":true}']],
    ['properties.managed', 'not_equals', false, 'NOT (a.properties @> $1::jsonb)', ['{"managed":false}']],
    ['properties.managed', 'is_empty', undefined, EMPTY('managed'), []],
    ['properties.managed', 'is_not_empty', undefined, `NOT (${EMPTY('managed')})`, []],
    // multi_select
    ['properties.tags', 'includes', 'web', 'a.properties @> $1::jsonb', ['{"tags":["web"]}']],
    ['properties.tags', 'not_includes', 'web', 'NOT (a.properties @> $1::jsonb)', ['{"tags":["web"]}']],
    ['properties.tags', 'is_empty', undefined, EMPTY('tags'), []],
    ['properties.tags', 'is_not_empty', undefined, `NOT (${EMPTY('tags')})`, []],
  ])('%s %s %j → %s', (field, operator, value, text, values) => {
    expect(sql(c(field, operator, value))).toEqual({ text, values })
  })
})

describe('compileFilter: groups and numbering', () => {
  it('compiles the CONTRACT §4 example, numbering values in traversal order', () => {
    const body = { or: [
      { and: [c('properties.environment', 'equals', 'prod'), c('properties.cpu_count', 'greater_than_or_equals', 16)] },
      c('name', 'starts_with', 'db-')] }
    expect(sql(body)).toEqual({
      text: `((a.properties @> $1::jsonb AND ${N('cpu_count')} >= $2) OR a."name" COLLATE "default" ILIKE $3 ESCAPE '\\')`,
      values: ['{"environment":"prod"}', 16, 'db-%'],
    })
  })

  it('continues the numbering of the Params it is given', () => {
    expect(compile(resolveFilter(parseFilter(c('name', 'equals', 'x')), 'assets', mm), 'a', [ORG_ID])).toEqual({ text: 'a."name" = $2', values: [ORG_ID, 'x'] })
  })

  it('compiles an empty and to TRUE and an empty or to FALSE', () => {
    expect(sql({ and: [] })).toEqual({ text: 'TRUE', values: [] })
    expect(sql({ or: [] })).toEqual({ text: 'FALSE', values: [] })
    expect(sql({ or: [{ and: [] }, { or: [] }] })).toEqual({ text: '(TRUE OR FALSE)', values: [] })
  })

  it('leaves a one-child group without parentheses', () => {
    expect(sql({ and: [{ or: [c('name', 'equals', 'x')] }] })).toEqual({ text: 'a."name" = $1', values: ['x'] })
  })

  it('nests groups with parentheses', () => {
    expect(sql({ and: [c('name', 'equals', 'x'), { or: [c('name', 'equals', 'y'), c('properties.tags', 'not_includes', 'db')] }] })).toEqual({
      text: '(a."name" = $1 AND (a."name" = $2 OR NOT (a.properties @> $3::jsonb)))',
      values: ['x', 'y', '{"tags":["db"]}'],
    })
  })
})

describe('compileFilter: relationships', () => {
  it('compiles source_asset.* and target_asset.* conditions to EXISTS, never a join', () => {
    const body = { and: [c('source_asset.properties.environment', 'equals', 'prod'), c('target_asset.name', 'starts_with', 'db')] }
    expect(sql(body, 'relationships')).toEqual({
      text: '(EXISTS (SELECT 1 FROM assets sa WHERE sa.org_id = r.org_id AND sa.id = r.source_asset_id AND sa.properties @> $1::jsonb)'
        + ` AND EXISTS (SELECT 1 FROM assets ta WHERE ta.org_id = r.org_id AND ta.id = r.target_asset_id AND ta."name" COLLATE "default" ILIKE $2 ESCAPE '\\'))`,
      values: ['{"environment":"prod"}', 'db%'],
    })
  })

  it('gathers the conditions of a group on one end into one EXISTS where the first stands: one probe of that asset', () => {
    const and = { and: [c('source_asset.name', 'starts_with', 'app'), c('relationship_type_key', 'equals', 'runs_on'), c('source_asset.properties.environment', 'equals', 'prod')] }
    expect(sql(and, 'relationships')).toEqual({
      text: `(EXISTS (SELECT 1 FROM assets sa WHERE sa.org_id = r.org_id AND sa.id = r.source_asset_id AND (sa."name" COLLATE "default" ILIKE $1 ESCAPE '\\' AND sa.properties @> $2::jsonb))`
        + ' AND r."relationship_type_key" = $3)',
      values: ['app%', '{"environment":"prod"}', 'runs_on'],
    })
    const or = { or: [c('target_asset.name', 'equals', 'a'), c('source_asset.name', 'equals', 'b'), c('target_asset.name', 'equals', 'c'), { and: [c('target_asset.name', 'equals', 'd')] }] }
    expect(sql(or, 'relationships')).toEqual({
      text: '(EXISTS (SELECT 1 FROM assets ta WHERE ta.org_id = r.org_id AND ta.id = r.target_asset_id AND (ta."name" = $1 OR ta."name" = $2))'
        + ' OR EXISTS (SELECT 1 FROM assets sa WHERE sa.org_id = r.org_id AND sa.id = r.source_asset_id AND sa."name" = $3)'
        + ' OR EXISTS (SELECT 1 FROM assets ta WHERE ta.org_id = r.org_id AND ta.id = r.target_asset_id AND ta."name" = $4))',
      values: ['a', 'c', 'b', 'd'],
    })
  })

  it('uses the inner alias for property expressions', () => {
    expect(sql(c('target_asset.properties.cpu_count', 'less_than', 4), 'relationships')).toEqual({
      text: 'EXISTS (SELECT 1 FROM assets ta WHERE ta.org_id = r.org_id AND ta.id = r.target_asset_id AND '
        + `(CASE WHEN jsonb_typeof(ta.properties->'cpu_count') = 'number' THEN (ta.properties->>'cpu_count')::numeric END) < $1)`,
      values: [4],
    })
  })

  it('looks a composite key up in the same statement', () => {
    const node = resolveListFilters(parseListFilters({ 'filter[source_asset_id]': 'server:hostname:web-01' }), 'relationships', mm)
    expect(compile(node, 'r', [ORG_ID])).toEqual({
      text: 'r."source_asset_id" IN (SELECT ca.id FROM assets ca WHERE ca.org_id = r.org_id AND ca.asset_type_key = $2 AND ca.unique_value = $3 AND ca.archived_at IS NULL)',
      values: [ORG_ID, 'server', 'web-01'],
    })
    expect(sql(c('target_asset_id', 'not_equals', 'server:hostname:web-01'), 'relationships')).toEqual({
      text: 'NOT (r."target_asset_id" IN (SELECT ca.id FROM assets ca WHERE ca.org_id = r.org_id AND ca.asset_type_key = $1 AND ca.unique_value = $2 AND ca.archived_at IS NULL))',
      values: ['server', 'web-01'],
    })
  })

  it('looks the composite keys of an in / not_in list up in one subquery, beside the UUIDs', () => {
    expect(sql(c('source_asset_id', 'in', [UUID1, 'server:hostname:web-01', 'server:hostname:web-02']), 'relationships')).toEqual({
      text: '(r."source_asset_id" = ANY($1::uuid[]) OR r."source_asset_id" IN (SELECT ca.id FROM assets ca WHERE ca.org_id = r.org_id'
        + ' AND (ca.asset_type_key, ca.unique_value) IN (SELECT * FROM unnest($2::text[], $3::text[])) AND ca.archived_at IS NULL))',
      values: [[UUID1], ['server', 'server'], ['web-01', 'web-02']],
    })
    expect(sql(c('id', 'not_in', ['server:hostname:web-01']))).toEqual({
      text: 'NOT (a."id" IN (SELECT ca.id FROM assets ca WHERE ca.org_id = a.org_id'
        + ' AND (ca.asset_type_key, ca.unique_value) IN (SELECT * FROM unnest($1::text[], $2::text[])) AND ca.archived_at IS NULL))',
      values: [['server'], ['web-01']],
    })
  })

  it('refuses an outer alias that collides with the inner one', () => {
    const node = resolveFilter(parseFilter(c('source_asset.name', 'equals', 'x')), 'relationships', mm)
    expect(() => compile(node, 'sa')).toThrow('alias sa is reserved for source assets')
  })
})

describe('compileFilter: list filters', () => {
  it('compiles typed list filters', () => {
    const node = resolveListFilters(parseListFilters({
      'filter[asset_type_key]': 'server', 'filter[properties.cpu_count]': '16', 'filter[properties.tags]': 'web', 'filter[properties.managed]': 'true',
    }), 'assets', mm)
    expect(compile(node, 'a', [ORG_ID])).toEqual({
      text: '(a."asset_type_key" = $2 AND a.properties @> $3::jsonb AND a.properties @> $4::jsonb AND a.properties @> $5::jsonb)',
      values: [ORG_ID, 'server', '{"cpu_count":16}', '{"tags":["web"]}', '{"managed":true}'],
    })
  })
})

describe('compileFilter: SQL fragments (access scopes)', () => {
  it('binds a fragment\'s values through Params and renumbers its placeholders', () => {
    const filter = resolveFilter(parseFilter(c('name', 'equals', 'x')), 'assets', mm)
    const scope = sqlNode('a.access_domain_key = $1 OR (a.access_domain_key = $2 AND a.asset_type_key = ANY($3::text[])) OR $2 = \'\'', ['it', 'ops', ['server']])
    expect(compile(andNodes(filter, scope), 'a', [ORG_ID])).toEqual({
      text: '(a."name" = $2 AND (a.access_domain_key = $3 OR (a.access_domain_key = $4 AND a.asset_type_key = ANY($5::text[])) OR $4 = \'\'))',
      values: [ORG_ID, 'x', 'it', 'ops', ['server']],
    })
  })

  it('keeps $10 and above whole', () => {
    const values = Array.from({ length: 11 }, (_, i) => i)
    expect(compile(sqlNode('x IN ($1, $10, $11)', values), 'a', ['p'])).toEqual({ text: '(x IN ($2, $11, $12))', values: ['p', ...values] })
  })

  it('throws when a fragment refers to a value it does not have', () => {
    expect(() => compile(sqlNode('x = $2', ['a']))).toThrow('SQL fragment refers to $2 but has 1 values')
  })
})

describe('compileFilter: injection', () => {
  const hostile = "x'); DROP TABLE assets;--"

  it.each<Row>([
    ['name', 'equals', hostile, 'a."name" = $1', [hostile]],
    ['properties.owner', 'equals', hostile, 'a.properties @> $1::jsonb', [JSON.stringify({ owner: hostile })]],
    ['properties.owner', 'contains', hostile, `${T('owner')} COLLATE "default" ILIKE $1 ESCAPE '\\'`, [`%${hostile}%`]],
    ['properties.tags', 'includes', hostile, 'a.properties @> $1::jsonb', [JSON.stringify({ tags: [hostile] })]],
    ['properties.environment', 'in', [hostile, '$1'], `${T('environment')} = ANY($1::text[])`, [[hostile, '$1']]],
  ])('keeps a hostile value of %s %s in values only', (field, operator, value, text, values) => {
    expect(sql(c(field, operator, value))).toEqual({ text, values })
  })

  it('escapes LIKE wildcards and backslashes in contains and starts_with', () => {
    expect(sql(c('name', 'contains', '50%_off\\')).values).toEqual(['%50\\%\\_off\\\\%'])
    expect(sql(c('properties.owner', 'starts_with', '_a%')).values).toEqual(['\\_a\\%%'])
  })
})

describe('compileFilter: never drops a clause', () => {
  const nameField = { kind: 'column', column: 'name', type: 'text', nullable: false, assetRef: false } as const

  it('throws on an operator the field cannot take', () => {
    const node: ResolvedNode = { kind: 'condition', field: nameField, operator: 'includes', value: { kind: 'scalar', value: 'x' } }
    expect(() => compile(node)).toThrow('includes cannot be compiled on column name')
  })

  it('throws on a value of the wrong shape', () => {
    const node: ResolvedNode = { kind: 'condition', field: nameField, operator: 'in', value: { kind: 'scalar', value: 'x' } }
    expect(() => compile(node)).toThrow('cannot compile in/not_in on a text field')
    const eq: ResolvedNode = { kind: 'condition', field: nameField, operator: 'equals', value: { kind: 'none' } }
    expect(() => compile(eq)).toThrow('expected one value, got none')
  })

  it('throws on in over a boolean property', () => {
    const node: ResolvedNode = { kind: 'condition', field: { kind: 'property', key: 'managed', type: 'boolean' }, operator: 'in', value: { kind: 'list', values: [true] } }
    expect(() => compile(node)).toThrow('cannot compile in/not_in on a boolean field')
  })

  it('throws on a composite key with another operator', () => {
    const node: ResolvedNode = { kind: 'condition', field: { ...nameField, column: 'source_asset_id', type: 'uuid', assetRef: true }, operator: 'in', value: { kind: 'asset_ref', asset_type_key: 's', unique_value: 'v' } }
    expect(() => compile(node, 'r')).toThrow('in cannot take a composite key')
  })

  it('throws on an unknown node kind', () => {
    expect(() => compile({ kind: 'xor' } as unknown as ResolvedNode)).toThrow('unexpected value {"kind":"xor"}')
  })

  it('throws on an alias that is not a plain name', () => {
    expect(() => compile({ kind: 'and', children: [] }, 'a; DROP')).toThrow('not a table alias: "a; DROP"')
  })

  it('throws on a property key that is not a metamodel key', () => {
    const node: ResolvedNode = { kind: 'condition', field: { kind: 'property', key: "x'--", type: 'text' }, operator: 'equals', value: { kind: 'scalar', value: 'v' } }
    expect(() => compile(node)).toThrow('not a property key: "x\'--"')
  })
})

describe('propertyExpr and propertyContains', () => {
  it('are the one place that knows the jsonb storage', () => {
    expect(propertyExpr('a', 'cpu_count', 'number')).toBe(N('cpu_count'))
    expect(propertyExpr('a', 'owner', 'text')).toBe(T('owner'))
    expect(propertyExpr('a', 'purchased_on', 'date')).toBe(T('purchased_on'))
    expect(propertyExpr('a', 'managed', 'boolean')).toBe(T('managed'))
    expect(propertyExpr('a', 'tags', 'multi')).toBe(T('tags'))
    expect(propertyExpr('x', 'tags', 'json')).toBe("x.properties->'tags'")
    const params = new Params()
    expect(propertyContains('a', 'tags', ['web'], params)).toBe('a.properties @> $1::jsonb')
    expect(params.values).toEqual(['{"tags":["web"]}'])
  })
})
