import { describe, expect, it } from 'vitest'
import { parseAnalytics } from '../../../src/analytics/spec.js'
import { MATCH_ALL } from '../../../src/query/resolve.js'
import { caught, givenMetamodel } from '../query/fixtures.js'

/** Pure: the body of POST /analytics/assets checked against the metamodel, and each error's pointer. */

const mm = givenMetamodel()
const parse = (body: unknown) => parseAnalytics(body, mm)
const fails = (body: unknown) => caught(() => parse(body))

describe('parseAnalytics', () => {
  it('defaults to one count, no groups, no filter', () => {
    expect(parse(undefined)).toEqual({ filter: MATCH_ALL, measures: [{ type: 'count', name: 'count' }], groupBy: [], breakdown: null })
  })

  it('names measures count and <type>:<field>, or as `as` says', () => {
    const spec = parse({ measures: [{ type: 'count', as: 'n' }, { type: 'count_distinct', field: 'properties.owner' }, { type: 'sum', field: 'properties.cpu_count' }, { type: 'average', field: 'properties.memory_gb', as: 'avg_memory' }] })
    expect(spec.measures).toEqual([
      { type: 'count', name: 'n' },
      { type: 'count_distinct', name: 'count_distinct:properties.owner', field: { kind: 'property', key: 'owner', kinds: ['text'] } },
      { type: 'sum', name: 'sum:properties.cpu_count', field: { kind: 'property', key: 'cpu_count', kinds: ['number'] } },
      { type: 'average', name: 'avg_memory', field: { kind: 'property', key: 'memory_gb', kinds: ['number'] } },
    ])
  })

  it('reads every kind of grouping', () => {
    const spec = parse({
      group_by: ['asset_type_key', { field: 'created_at', interval: 'week' }, { field: 'related_asset_type_key', relationship_type_key: 'runs_on', direction: 'incoming', as: 'hosts' }, 'related_asset_type_key'],
      breakdown_by: { field: 'properties.purchased_on', interval: 'year' },
    })
    expect(spec.groupBy).toEqual([
      { kind: 'field', name: 'asset_type_key', field: { kind: 'column', column: 'asset_type_key', timestamp: false }, interval: null },
      { kind: 'field', name: 'created_at', field: { kind: 'column', column: 'created_at', timestamp: true }, interval: 'week' },
      { kind: 'related', name: 'hosts', relationshipTypeKey: 'runs_on', direction: 'incoming' },
      { kind: 'related', name: 'related_asset_type_key', relationshipTypeKey: null, direction: 'outgoing' },
    ])
    expect(spec.breakdown).toEqual({ kind: 'field', name: 'properties.purchased_on', field: { kind: 'property', key: 'purchased_on', kinds: ['date'] }, interval: 'year' })
  })

  it('sums a key of mixed kinds only where the filter reaches the types that define it as a number', () => {
    const rack = { filter: { field: 'asset_type_key', operator: 'equals', value: 'rack' } }
    expect(parse({ ...rack, measures: [{ type: 'sum', field: 'properties.size' }] }).measures).toEqual([
      { type: 'sum', name: 'sum:properties.size', field: { kind: 'property', key: 'size', kinds: ['number'] } },
    ])
    expect(fails({ measures: [{ type: 'average', field: 'properties.size' }] }).issues[0]?.detail).toBe(
      'average needs a number or integer property; properties.size is a number on some asset types and not on others, so it is read as text: filter asset_type_key to the types where it is a number or an integer')
  })

  it('refuses sum and average on currency, percentage and score properties (CONTRACT §7: "only on number and integer properties")', () => {
    expect(fails({ measures: [{ type: 'sum', field: 'properties.price' }] }).issues).toEqual([{ pointer: '/measures/0/field',
      detail: 'sum takes number and integer properties only (not currency, percentage or score); properties.price is a currency property of rack' }])
    expect(fails({ measures: [{ type: 'average', field: 'properties.owner' }] }).issues[0]?.detail).toBe('average needs a number or integer property; properties.owner is not one')
  })

  it.each<[string, unknown, string, string]>([
    ['a body that is not an object', [1], '', 'invalid_request'],
    ['an unknown member', { measure: [] }, '/measure', 'invalid_request'],
    ['an empty measure list', { measures: [] }, '/measures', 'invalid_request'],
    ['an unknown measure type', { measures: [{ type: 'median', field: 'properties.cpu_count' }] }, '/measures/0/type', 'invalid_request'],
    ['sum on a text property', { measures: [{ type: 'sum', field: 'properties.owner' }] }, '/measures/0/field', 'invalid_request'],
    ['average on a system field', { measures: [{ type: 'average', field: 'created_at' }] }, '/measures/0/field', 'invalid_request'],
    ['sum on a key of mixed kinds (integer on racks, text on cables), read as text', { measures: [{ type: 'sum', field: 'properties.size' }] }, '/measures/0/field', 'invalid_request'],
    ['count_distinct without a field', { measures: [{ type: 'count_distinct' }] }, '/measures/0/field', 'invalid_request'],
    ['count with a field', { measures: [{ type: 'count', field: 'name' }] }, '/measures/0/field', 'invalid_request'],
    ['an unknown property', { measures: [{ type: 'count_distinct', field: 'properties.colour' }] }, '/measures/0/field', 'invalid_request'],
    ['an empty as', { measures: [{ type: 'count', as: '' }] }, '/measures/0/as', 'invalid_request'],
    ['two measures of one name', { measures: [{ type: 'count' }, { type: 'count_distinct', field: 'name', as: 'count' }] }, '/measures/1', 'invalid_request'],
    ['an unknown member in a measure', { measures: [{ type: 'count', filter: {} }] }, '/measures/0/filter', 'invalid_request'],
    ['group_by that is not an array', { group_by: 'asset_type_key' }, '/group_by', 'invalid_request'],
    ['an unknown group field', { group_by: ['asset_type_key', 'colour'] }, '/group_by/1', 'invalid_request'],
    ['created_at without an interval', { group_by: ['created_at'] }, '/group_by/0', 'invalid_request'],
    ['an unknown interval', { group_by: [{ field: 'created_at', interval: 'fortnight' }] }, '/group_by/0/interval', 'invalid_request'],
    ['an interval on text', { group_by: [{ field: 'properties.owner', interval: 'day' }] }, '/group_by/0/interval', 'invalid_request'],
    ['an unknown relationship type', { group_by: [{ field: 'related_asset_type_key', relationship_type_key: 'owns' }] }, '/group_by/0/relationship_type_key', 'invalid_request'],
    ['a bad direction', { group_by: [{ field: 'related_asset_type_key', direction: 'both' }] }, '/group_by/0/direction', 'invalid_request'],
    ['a relationship type on a plain field', { group_by: [{ field: 'name', relationship_type_key: 'runs_on' }] }, '/group_by/0/field', 'invalid_request'],
    ['two groupings of one name', { group_by: ['name', { field: 'asset_type_key', as: 'name' }] }, '/group_by/1', 'invalid_request'],
    ['more than 10 groupings', { group_by: Array.from({ length: 11 }, (_, i) => ({ field: 'name', as: `n${i}` })) }, '/group_by', 'invalid_request'],
    ['an unknown breakdown field', { breakdown_by: { field: 'colour' } }, '/breakdown_by/field', 'invalid_request'],
    ['an operator that does not fit', { filter: { field: 'properties.cpu_count', operator: 'contains', value: '1' } }, '/filter/operator', 'invalid_filter'],
  ])('rejects %s with 400 and a pointer', (_, body, pointer, code) => {
    const error = fails(body)
    expect({ status: error.status, code: error.code, pointer: error.issues[0]?.pointer }).toEqual({ status: 400, code, pointer })
  })
})
