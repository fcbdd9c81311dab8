import { describe, expect, it } from 'vitest'
import { OPERATORS, type Operator } from '../../../src/query/ast.js'
import { parseFilter } from '../../../src/query/parse.js'
import { parseListFilters, resolveListFilters } from '../../../src/query/list.js'
import { MATCH_ALL, andNodes, resolveFilter, sqlNode } from '../../../src/query/resolve.js'
import type { Target } from '../../../src/query/fields.js'
import { caught, givenMetamodel } from './fixtures.js'

const mm = givenMetamodel()
const UUID = '0190B3B0-0000-7000-8000-0000000000AA'
const uuid = UUID.toLowerCase()

function resolve(body: unknown, target: Target = 'assets') {
  return resolveFilter(parseFilter(body), target, mm)
}

function resolveList(query: Record<string, unknown>, target: Target = 'assets') {
  return resolveListFilters(parseListFilters(query), target, mm)
}

const invalid = (detail: string, pointer: string) => ({ status: 400, code: 'invalid_filter', issues: [{ detail, pointer }] })
const invalidParam = (detail: string, parameter: string) => ({ status: 400, code: 'invalid_filter', issues: [{ detail, parameter }] })

const TEXT: Operator[] = ['equals', 'not_equals', 'contains', 'not_contains', 'starts_with', 'in', 'not_in', 'is_empty', 'is_not_empty']
const ORDERED: Operator[] = ['equals', 'not_equals', 'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals', 'in', 'not_in', 'is_empty', 'is_not_empty']

/** The operator × type table of the brief, written out independently of the implementation. */
const FIELDS: { field: string; type: string; sample: unknown; operators: Operator[]; target?: Target }[] = [
  { field: 'name', type: 'text', sample: 'web', operators: TEXT },
  { field: 'asset_type_key', type: 'text', sample: 'server', operators: TEXT },
  { field: 'access_domain_key', type: 'text', sample: 'it', operators: TEXT },
  { field: 'properties.owner', type: 'text', sample: 'ann', operators: TEXT },
  { field: 'properties.environment', type: 'text', sample: 'prod', operators: TEXT },
  { field: 'properties.hostname', type: 'text', sample: 'web-01', operators: TEXT },
  { field: 'properties.cpu_count', type: 'number', sample: 16, operators: ORDERED },
  { field: 'properties.memory_gb', type: 'number', sample: 7.5, operators: ORDERED },
  { field: 'properties.purchased_on', type: 'date', sample: '2026-01-31', operators: ORDERED },
  { field: 'created_at', type: 'timestamp', sample: '2026-01-31T09:15:00.000Z', operators: ORDERED.slice(0, 6) },
  { field: 'updated_at', type: 'timestamp', sample: '2026-01-31T09:15:00.000Z', operators: ORDERED.slice(0, 6) },
  { field: 'properties.managed', type: 'boolean', sample: true, operators: ['equals', 'not_equals', 'is_empty', 'is_not_empty'] },
  { field: 'properties.tags', type: 'multi-select', sample: 'web', operators: ['includes', 'not_includes', 'is_empty', 'is_not_empty'] },
  { field: 'id', type: 'UUID', sample: uuid, operators: ['equals', 'not_equals', 'in', 'not_in'] },
  { field: 'relationship_type_key', type: 'text', sample: 'runs_on', operators: TEXT, target: 'relationships' },
  { field: 'source_asset_id', type: 'UUID', sample: uuid, operators: ['equals', 'not_equals', 'in', 'not_in'], target: 'relationships' },
  { field: 'target_asset_id', type: 'UUID', sample: uuid, operators: ['equals', 'not_equals', 'in', 'not_in'], target: 'relationships' },
  { field: 'created_at', type: 'timestamp', sample: '2026-01-31T09:15:00.000Z', operators: ORDERED.slice(0, 6), target: 'relationships' },
]

function valueFor(operator: Operator, sample: unknown): unknown {
  if (operator === 'in' || operator === 'not_in') return [sample]
  if (operator === 'is_empty' || operator === 'is_not_empty') return undefined
  return sample
}

function expectedValue(operator: Operator, sample: unknown) {
  if (operator === 'in' || operator === 'not_in') return { kind: 'list', values: [sample] }
  if (operator === 'is_empty' || operator === 'is_not_empty') return { kind: 'none' }
  return { kind: 'scalar', value: sample }
}

const cases = FIELDS.flatMap((f) => OPERATORS.map((operator) => ({ ...f, operator, fits: f.operators.includes(operator) })))

describe('resolveFilter: operator × type', () => {
  it.each(cases.filter((c) => c.fits))('accepts $operator on $type field $field ($target)', ({ field, operator, sample, target }) => {
    const node = resolve({ field, operator, value: valueFor(operator, sample) }, target)
    expect(node).toMatchObject({ kind: 'condition', operator, value: expectedValue(operator, sample) })
  })

  it.each(cases.filter((c) => !c.fits))('rejects $operator on $type field $field ($target)', ({ field, operator, sample, target, type, operators }) => {
    const body = { and: [{ field, operator, value: valueFor(operator, sample) }] }
    expect(caught(() => resolve(body, target))).toEqual(
      invalid(`${operator} does not fit ${type} field ${field}; it takes ${operators.join(', ')}`, '/filter/and/0/operator'))
  })
})

describe('resolveFilter: resolved nodes', () => {
  it('resolves a number property condition', () => {
    expect(resolve({ field: 'properties.cpu_count', operator: 'greater_than', value: 16 })).toEqual({
      kind: 'condition', field: { kind: 'property', key: 'cpu_count', type: 'number', integer: true }, operator: 'greater_than',
      value: { kind: 'scalar', value: 16 },
    })
  })

  it('resolves system columns with their type and nullability', () => {
    expect(resolve({ field: 'access_domain_key', operator: 'not_equals', value: 'it' })).toEqual({
      kind: 'condition', field: { kind: 'column', column: 'access_domain_key', type: 'text', nullable: true, assetRef: false },
      operator: 'not_equals', value: { kind: 'scalar', value: 'it' },
    })
  })

  it('resolves groups recursively and freezes every node', () => {
    const node = resolve({ or: [{ and: [] }, { field: 'name', operator: 'equals', value: 'a' }] })
    expect(node).toEqual({ kind: 'or', children: [{ kind: 'and', children: [] }, {
      kind: 'condition', field: { kind: 'column', column: 'name', type: 'text', nullable: false, assetRef: false },
      operator: 'equals', value: { kind: 'scalar', value: 'a' } }] })
    expect(Object.isFrozen(node)).toBe(true)
    expect(node.kind === 'or' && Object.isFrozen(node.children[1])).toBe(true)
  })

  it('resolves no filter to MATCH_ALL', () => {
    expect(resolveFilter(null, 'assets', mm)).toBe(MATCH_ALL)
    expect(MATCH_ALL).toEqual({ kind: 'and', children: [] })
  })

  it.each([
    ['2026-01-31', '2026-01-31T00:00:00.000Z'],
    ['2026-01-31T09:15:00Z', '2026-01-31T09:15:00.000Z'],
    ['2026-01-31T09:15', '2026-01-31T09:15:00.000Z'],
    ['2026-01-31T10:15:00.5+01:00', '2026-01-31T09:15:00.500Z'],
  ])('normalizes timestamp %s to %s', (value, normalized) => {
    expect(resolve({ field: 'created_at', operator: 'less_than', value })).toMatchObject({ value: { kind: 'scalar', value: normalized } })
  })

  it('lower-cases UUIDs in equals and in', () => {
    expect(resolve({ field: 'id', operator: 'in', value: [UUID] })).toMatchObject({ value: { kind: 'list', values: [uuid] } })
    expect(resolve({ field: 'id', operator: 'equals', value: UUID })).toMatchObject({ value: { kind: 'scalar', value: uuid } })
  })

  it('accepts null for is_empty', () => {
    expect(resolve({ field: 'properties.owner', operator: 'is_empty', value: null })).toMatchObject({ value: { kind: 'none' } })
  })

  it('wraps source_asset.* conditions of relationships in a related node', () => {
    expect(resolve({ field: 'source_asset.properties.environment', operator: 'equals', value: 'prod' }, 'relationships')).toEqual({
      kind: 'related', end: 'source', condition: {
        kind: 'condition', field: { kind: 'property', key: 'environment', type: 'text' }, operator: 'equals', value: { kind: 'scalar', value: 'prod' } },
    })
    expect(resolve({ field: 'target_asset.name', operator: 'starts_with', value: 'db' }, 'relationships')).toMatchObject({
      kind: 'related', end: 'target', condition: { field: { kind: 'column', column: 'name' }, operator: 'starts_with' },
    })
  })

  it('keeps a composite key for source_asset_id as an asset_ref', () => {
    expect(resolve({ field: 'source_asset_id', operator: 'not_equals', value: 'server:hostname:web-01' }, 'relationships')).toEqual({
      kind: 'condition', field: { kind: 'column', column: 'source_asset_id', type: 'uuid', nullable: false, assetRef: true },
      operator: 'not_equals', value: { kind: 'asset_ref', asset_type_key: 'server', unique_value: 'web-01' },
    })
  })
})

describe('resolveFilter: a key with two kinds (size: integer on rack, text on cable)', () => {
  it('takes the number reading for a number value', () => {
    expect(resolve({ field: 'properties.size', operator: 'equals', value: 3 })).toMatchObject({ field: { type: 'number' }, value: { value: 3 } })
  })

  it('takes the text reading for a string value', () => {
    expect(resolve({ field: 'properties.size', operator: 'equals', value: '3' })).toMatchObject({ field: { type: 'text' }, value: { value: '3' } })
  })

  it('takes the reading whose operators fit', () => {
    expect(resolve({ field: 'properties.size', operator: 'starts_with', value: 'x' })).toMatchObject({ field: { type: 'text' } })
  })

  it('takes a fraction only where the key holds fractions: none of size\'s readings in a body, the text one in a list', () => {
    expect(caught(() => resolve({ field: 'properties.size', operator: 'equals', value: 1.5 }))).toEqual(
      invalid('properties.size needs an integer, got 1.5', '/filter/value'))
    expect(resolveListFilters(parseListFilters({ 'filter[properties.size]': '1.5' }), 'assets', mm)).toMatchObject(
      { kind: 'and', children: [{ field: { type: 'text' }, value: { value: '1.5' } }] })
  })

  it('reports the value error of the first fitting reading', () => {
    expect(caught(() => resolve({ field: 'properties.size', operator: 'greater_than', value: 'x' }))).toEqual(
      invalid('properties.size needs a number, got "x"', '/filter/value'))
  })

  it('lists the operators of both readings when none fits', () => {
    expect(caught(() => resolve({ field: 'properties.size', operator: 'includes', value: 'x' }))).toEqual(invalid(
      'includes does not fit number or text field properties.size; it takes equals, not_equals, greater_than, greater_than_or_equals, '
      + 'less_than, less_than_or_equals, in, not_in, is_empty, is_not_empty, contains, not_contains, starts_with', '/filter/operator'))
  })
})

describe('resolveFilter: errors', () => {
  const at = (field: string, operator: Operator, value?: unknown) => ({ or: [{ field: 'name', operator: 'equals', value: 'a' }, { field, operator, value }] })

  it.each([
    ['nope', 'unknown field "nope"; assets are filtered by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
    ['properties.nope', 'unknown property "nope": no asset type in the metamodel defines it'],
    ['properties.', 'unknown property "": no asset type in the metamodel defines it'],
    ['properties.x\'); DROP TABLE assets;--', 'unknown property "x\'); DROP TABLE assets;--": no asset type in the metamodel defines it'],
    ['name"; DROP TABLE assets;--', 'unknown field "name\\"; DROP TABLE assets;--"; assets are filtered by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
    ['properties.__proto__', 'unknown property "__proto__": no asset type in the metamodel defines it'],
    ['constructor', 'unknown field "constructor"; assets are filtered by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
    ['relationship_type_key', 'unknown field "relationship_type_key"; assets are filtered by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
    ['source_asset.name', 'unknown field "source_asset.name"; assets are filtered by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
  ])('rejects unknown asset field %s at /field', (field, detail) => {
    expect(caught(() => resolve(at(field, 'equals', 'a')))).toEqual(invalid(detail, '/filter/or/1/field'))
  })

  it.each([
    ['name', 'unknown field "name"; relationships are filtered by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at, source_asset.<asset field>, target_asset.<asset field>'],
    ['source_asset.nope', 'unknown field "source_asset.nope"; relationships are filtered by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at, source_asset.<asset field>, target_asset.<asset field>'],
    ['source_asset.source_asset_id', 'unknown field "source_asset.source_asset_id"; relationships are filtered by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at, source_asset.<asset field>, target_asset.<asset field>'],
    ['target_asset.properties.nope', 'unknown property "nope": no asset type in the metamodel defines it'],
    ['properties.owner', 'unknown field "properties.owner"; relationships are filtered by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at, source_asset.<asset field>, target_asset.<asset field>'],
  ])('rejects unknown relationship field %s at /field', (field, detail) => {
    expect(caught(() => resolve({ field, operator: 'equals', value: 'a' }, 'relationships'))).toEqual(invalid(detail, '/filter/field'))
  })

  it.each([
    ['properties.cpu_count', 'equals', '16', 'properties.cpu_count needs a number, got "16"'],
    ['properties.cpu_count', 'greater_than', true, 'properties.cpu_count needs a number, got true'],
    ['properties.cpu_count', 'equals', 1.5, 'properties.cpu_count needs an integer, got 1.5'],
    ['properties.cpu_count', 'less_than', 2.5, 'properties.cpu_count needs an integer, got 2.5'],
    ['properties.memory_gb', 'less_than', { n: 1 }, 'properties.memory_gb needs a number, got an object'],
    ['properties.managed', 'equals', 'true', 'properties.managed needs true or false, got "true"'],
    ['properties.purchased_on', 'equals', '2026-02-30', 'properties.purchased_on needs a date YYYY-MM-DD, got "2026-02-30"'],
    ['properties.purchased_on', 'greater_than', '2026-01-01T00:00:00Z', 'properties.purchased_on needs a date YYYY-MM-DD, got "2026-01-01T00:00:00Z"'],
    ['properties.purchased_on', 'less_than', '2026-1-1', 'properties.purchased_on needs a date YYYY-MM-DD, got "2026-1-1"'],
    ['properties.purchased_on', 'less_than', 20260101, 'properties.purchased_on needs a date YYYY-MM-DD, got 20260101'],
    ['created_at', 'greater_than', '2026-01-31 09:15:00', 'created_at needs an ISO 8601 date or UTC timestamp, e.g. 2026-01-31 or 2026-01-31T09:15:00Z, got "2026-01-31 09:15:00"'],
    ['created_at', 'greater_than', '2026-01-31T24:00:00Z', 'created_at needs an ISO 8601 date or UTC timestamp, e.g. 2026-01-31 or 2026-01-31T09:15:00Z, got "2026-01-31T24:00:00Z"'],
    ['updated_at', 'equals', 'yesterday', 'updated_at needs an ISO 8601 date or UTC timestamp, e.g. 2026-01-31 or 2026-01-31T09:15:00Z, got "yesterday"'],
    ['name', 'equals', 5, 'name needs a string, got 5'],
    ['properties.owner', 'contains', ['a'], 'properties.owner needs a string, got an array'],
    ['properties.tags', 'includes', ['web'], 'properties.tags needs one option, a string, got an array'],
    ['id', 'equals', 'not-a-uuid', 'id needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got "not-a-uuid"'],
    ['properties.purchased_on', 'equals', 'x'.repeat(41), 'properties.purchased_on needs a date YYYY-MM-DD, got a string of 41 characters'],
  ])('rejects %s %s %j at /value', (field, operator, value, detail) => {
    expect(caught(() => resolve(at(field, operator as Operator, value)))).toEqual(invalid(detail, '/filter/or/1/value'))
  })

  it.each([
    ['properties.owner', 'equals', undefined, 'equals needs a value'],
    ['properties.owner', 'not_equals', null, 'not_equals needs a value; use is_empty or is_not_empty to find empty values'],
    ['name', 'contains', '', 'contains needs a non-empty string'],
    ['properties.owner', 'not_contains', '', 'not_contains needs a non-empty string'],
    ['name', 'starts_with', '', 'starts_with needs a non-empty string'],
    ['properties.owner', 'is_empty', '', 'is_empty takes no value'],
    ['properties.tags', 'is_not_empty', [], 'is_not_empty takes no value'],
    ['properties.cpu_count', 'not_in', 16, 'not_in needs an array of values, got 16'],
    ['name', 'in', undefined, 'in needs an array of values, got nothing'],
  ])('rejects %s %s %j at /value', (field, operator, value, detail) => {
    expect(caught(() => resolve(at(field, operator as Operator, value)))).toEqual(invalid(detail, '/filter/or/1/value'))
  })

  it('points at the bad element of an in list', () => {
    expect(caught(() => resolve(at('properties.cpu_count', 'in', [1, '2', 3])))).toEqual(
      invalid('properties.cpu_count needs a number, got "2"', '/filter/or/1/value/1'))
    expect(caught(() => resolve(at('id', 'not_in', [uuid, null])))).toEqual(invalid('id needs a UUID, got null', '/filter/or/1/value/1'))
    expect(caught(() => resolve(at('properties.cpu_count', 'not_in', [1, 2.5])))).toEqual(
      invalid('properties.cpu_count needs an integer, got 2.5', '/filter/or/1/value/1'))
  })

  it.each([
    ['rack:size:3', 'rack has no unique key'],
    ['nope:hostname:web-01', 'unknown type'],
    ['server:owner:web-01', 'not the unique key'],
    ['server:hostname:', 'empty value'],
    ['web-01', 'no colons'],
  ])('rejects composite key %s (%s)', (value) => {
    expect(caught(() => resolve({ field: 'target_asset_id', operator: 'equals', value }, 'relationships'))).toEqual(invalid(
      `target_asset_id needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got ${JSON.stringify(value)}`, '/filter/value'))
  })

  it('takes UUIDs and composite keys mixed in in / not_in on fields naming assets', () => {
    expect(resolve({ field: 'source_asset_id', operator: 'in', value: ['server:hostname:web-01', uuid.toUpperCase()] }, 'relationships')).toMatchObject({
      operator: 'in', value: { kind: 'asset_refs', ids: [uuid], keys: [{ asset_type_key: 'server', unique_value: 'web-01' }] },
    })
    expect(caught(() => resolve({ field: 'target_asset_id', operator: 'not_in', value: ['server:hostname:web-01', 'web-02'] }, 'relationships'))).toEqual(invalid(
      'target_asset_id needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got "web-02"', '/filter/value/1'))
  })

  it('takes a composite key on the id of an asset', () => {
    expect(resolve({ field: 'id', operator: 'equals', value: 'server:hostname:web-01' })).toMatchObject({
      value: { kind: 'asset_ref', asset_type_key: 'server', unique_value: 'web-01' },
    })
  })
})

describe('resolveListFilters', () => {
  const field = (column: string, type: string, nullable = false, assetRef = false) => ({ kind: 'column', column, type, nullable, assetRef })

  it('parses each value by the field type', () => {
    const node = resolveList({
      'filter[properties.cpu_count]': '16', 'filter[properties.memory_gb]': '-0.5e1', 'filter[properties.managed]': 'false',
      'filter[properties.purchased_on]': '2026-01-31', 'filter[id]': UUID, 'filter[name]': 'web-01',
    })
    expect(node).toEqual({ kind: 'and', children: [
      { kind: 'condition', field: { kind: 'property', key: 'cpu_count', type: 'number', integer: true }, operator: 'equals', value: { kind: 'scalar', value: 16 } },
      { kind: 'condition', field: { kind: 'property', key: 'memory_gb', type: 'number' }, operator: 'equals', value: { kind: 'scalar', value: -5 } },
      { kind: 'condition', field: { kind: 'property', key: 'managed', type: 'boolean' }, operator: 'equals', value: { kind: 'scalar', value: false } },
      { kind: 'condition', field: { kind: 'property', key: 'purchased_on', type: 'date' }, operator: 'equals', value: { kind: 'scalar', value: '2026-01-31' } },
      { kind: 'condition', field: field('id', 'uuid', false, true), operator: 'equals', value: { kind: 'scalar', value: uuid } },
      { kind: 'condition', field: field('name', 'text'), operator: 'equals', value: { kind: 'scalar', value: 'web-01' } },
    ] })
  })

  it('turns equality on a multi-select into includes', () => {
    expect(resolveList({ 'filter[properties.tags]': 'web' })).toEqual({ kind: 'and', children: [
      { kind: 'condition', field: { kind: 'property', key: 'tags', type: 'multi' }, operator: 'includes', value: { kind: 'scalar', value: 'web' } }] })
  })

  it('reads "3" on a two-kind key as each asset\'s own type reads it: the number 3 or the text "3"', () => {
    expect(resolveList({ 'filter[properties.size]': '3' })).toMatchObject({ children: [{
      kind: 'or',
      children: [{ field: { type: 'number' }, operator: 'equals', value: { value: 3 } }, { field: { type: 'text' }, operator: 'equals', value: { value: '3' } }],
    }] })
    // A value only one reading takes: that one alone.
    expect(resolveList({ 'filter[properties.size]': 'xl' })).toMatchObject({ children: [{ kind: 'condition', field: { type: 'text' }, value: { value: 'xl' } }] })
  })

  it('accepts UUIDs and composite keys for relationship ends', () => {
    const node = resolveList({ 'filter[source_asset_id]': 'server:hostname:web-01', 'filter[target_asset_id]': UUID, 'filter[relationship_type_key]': 'runs_on' }, 'relationships')
    expect(node).toEqual({ kind: 'and', children: [
      { kind: 'condition', field: field('source_asset_id', 'uuid', false, true), operator: 'equals', value: { kind: 'asset_ref', asset_type_key: 'server', unique_value: 'web-01' } },
      { kind: 'condition', field: field('target_asset_id', 'uuid', false, true), operator: 'equals', value: { kind: 'scalar', value: uuid } },
      { kind: 'condition', field: field('relationship_type_key', 'text'), operator: 'equals', value: { kind: 'scalar', value: 'runs_on' } },
    ] })
  })

  it.each([
    ['filter[properties.cpu_count]', '16x', 'properties.cpu_count needs a number, got "16x"'],
    ['filter[properties.cpu_count]', '', 'properties.cpu_count needs a number, got ""'],
    ['filter[properties.cpu_count]', '1e999', 'properties.cpu_count needs a number, got "1e999"'],
    ['filter[properties.cpu_count]', '1.5', 'properties.cpu_count needs an integer, got 1.5'],
    ['filter[properties.managed]', 'yes', 'properties.managed needs true or false, got "yes"'],
    ['filter[properties.purchased_on]', '2026-02-29', 'properties.purchased_on needs a date YYYY-MM-DD, got "2026-02-29"'],
    ['filter[properties.purchased_on]', '2026-01-01T00:00:00Z', 'properties.purchased_on needs a date YYYY-MM-DD, got "2026-01-01T00:00:00Z"'],
    ['filter[id]', 'web-01', 'id needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got "web-01"'],
    ['filter[properties.nope]', 'a', 'unknown property "nope": no asset type in the metamodel defines it'],
    ['filter[created_at]', '2026-01-01', 'unknown list filter field "created_at"; list filters take id, asset_type_key, name, access_domain_key, properties.<key>'],
    ['filter[properties.x\'); DROP TABLE assets;--]', 'a', 'unknown property "x\'); DROP TABLE assets;--": no asset type in the metamodel defines it'],
  ])('rejects %s=%s naming the parameter', (parameter, value, detail) => {
    expect(caught(() => resolveList({ [parameter]: value }))).toEqual(invalidParam(detail, parameter))
  })

  it.each([
    ['filter[id]', uuid, 'unknown list filter field "id"; list filters take relationship_type_key, source_asset_id, target_asset_id'],
    ['filter[source_asset.name]', 'a', 'unknown list filter field "source_asset.name"; list filters take relationship_type_key, source_asset_id, target_asset_id'],
    ['filter[properties.owner]', 'a', 'unknown list filter field "properties.owner"; list filters take relationship_type_key, source_asset_id, target_asset_id'],
    ['filter[target_asset_id]', 'rack:size:3', 'target_asset_id needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got "rack:size:3"'],
  ])('rejects relationship list filter %s=%s', (parameter, value, detail) => {
    expect(caught(() => resolveList({ [parameter]: value }, 'relationships'))).toEqual(invalidParam(detail, parameter))
  })
})

describe('composable nodes', () => {
  it('ANDs a compiled SQL fragment with a resolved filter', () => {
    const filter = resolve({ field: 'name', operator: 'equals', value: 'a' })
    const scope = sqlNode('a.access_domain_key = $1', ['it'])
    expect(andNodes(filter, scope)).toEqual({ kind: 'and', children: [filter, { kind: 'sql', text: 'a.access_domain_key = $1', values: ['it'] }] })
    expect(Object.isFrozen(scope)).toBe(true)
  })
})
