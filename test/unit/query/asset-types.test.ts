import { describe, expect, it } from 'vitest'
import { assetTypesOf, definitionsOf, readingTypes } from '../../../src/query/asset-types.js'
import { parseFilter } from '../../../src/query/parse.js'
import { parseListFilters } from '../../../src/query/list.js'
import { givenMetamodel } from './fixtures.js'

const mm = givenMetamodel()
const types = (filter: unknown) => {
  const set = assetTypesOf(parseFilter(filter, '/filter'))
  return set === null ? null : [...set].sort()
}
const type = (value: unknown, operator = 'equals') => ({ field: 'asset_type_key', operator, value })

describe('assetTypesOf', () => {
  it('reads equals and in on asset_type_key', () => {
    expect(types(type('rack'))).toEqual(['rack'])
    expect(types(type(['rack', 'cable'], 'in'))).toEqual(['cable', 'rack'])
  })

  it('restricts nothing without a type condition, or with one it cannot read', () => {
    expect(assetTypesOf(null)).toBeNull()
    expect(types({ and: [] })).toBeNull()
    expect(types({ field: 'name', operator: 'equals', value: 'x' })).toBeNull()
    expect(types(type('rack', 'not_equals'))).toBeNull()
    expect(types(type(['rack'], 'not_in'))).toBeNull()
    expect(types(type('rack', 'starts_with'))).toBeNull()
  })

  it('intersects what the children of an and restrict; an or restricts only when every branch does', () => {
    expect(types({ and: [type(['rack', 'cable'], 'in'), { field: 'name', operator: 'equals', value: 'x' }, type('rack')] })).toEqual(['rack'])
    expect(types({ and: [type('rack'), type('cable')] })).toEqual([])
    expect(types({ or: [type('rack'), type('cable')] })).toEqual(['cable', 'rack'])
    expect(types({ or: [type('rack'), { field: 'name', operator: 'equals', value: 'x' }] })).toBeNull()
    expect(types({ and: [{ or: [type('rack'), type('server')] }, { or: [type('rack'), type('cable')] }] })).toEqual(['rack'])
  })

  it('reads the list filters of GET /assets', () => {
    const set = assetTypesOf(parseListFilters({ 'filter[asset_type_key]': 'cable', 'filter[name]': 'x' }))
    expect(set === null ? null : [...set]).toEqual(['cable'])
  })
})

describe('definitionsOf and readingTypes', () => {
  it('keeps the definitions of the types given, or all when they define none', () => {
    expect(definitionsOf(mm, 'size', new Set(['rack'])).map((d) => d.type)).toEqual(['integer'])
    expect(definitionsOf(mm, 'size', new Set(['cable'])).map((d) => d.type)).toEqual(['text'])
    expect(definitionsOf(mm, 'size', null).map((d) => d.asset_type_key)).toEqual(['rack', 'cable'])
    expect(definitionsOf(mm, 'size', new Set(['server'])).map((d) => d.asset_type_key)).toEqual(['rack', 'cable'])
    expect(readingTypes(mm, null)).toBe(mm)
    expect(readingTypes(mm, new Set(['rack'])).propertiesByKey.get('size')!.map((d) => d.type)).toEqual(['integer'])
  })
})
