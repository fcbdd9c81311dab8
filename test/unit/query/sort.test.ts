import { describe, expect, it } from 'vitest'
import { Params } from '../../../src/store/sql.js'
import { compileOrderBy, parseSortParam, type SortSpec } from '../../../src/query/sort.js'
import type { Target } from '../../../src/query/fields.js'
import { caught, givenMetamodel } from './fixtures.js'

const mm = givenMetamodel()

function orderBy(specs: readonly SortSpec[], target: Target = 'assets', alias = target === 'assets' ? 'a' : 'r'): string {
  return compileOrderBy(specs, target, mm, alias)
}

const invalidSort = (detail: string, source: { pointer: string } | { parameter: string }) => ({ status: 400, code: 'invalid_sort', issues: [{ detail, ...source }] })

describe('parseSortParam', () => {
  it('reads sort=name,-created_at', () => {
    expect(parseSortParam('name,-created_at')).toEqual([{ field: 'name', order: 'asc' }, { field: 'created_at', order: 'desc' }])
  })

  it('trims items and reads an empty parameter as the default order', () => {
    expect(parseSortParam(' -name , properties.cpu_count')).toEqual([{ field: 'name', order: 'desc' }, { field: 'properties.cpu_count', order: 'asc' }])
    expect(parseSortParam('')).toEqual([])
  })

  it.each([['name,,id', 2], ['-', 1], ['name,', 2]])('rejects %s (item %i names no field)', (sort, item) => {
    expect(caught(() => parseSortParam(sort))).toEqual(invalidSort(
      `sort item ${item} names no field; use sort=<field> or sort=-<field>, comma-separated`, { parameter: 'sort' }))
  })
})

describe('compileOrderBy', () => {
  it('defaults to created_at, id', () => {
    expect(orderBy([])).toBe('a."created_at" ASC, a."id" ASC')
    expect(orderBy([], 'relationships')).toBe('r."created_at" ASC, r."id" ASC')
  })

  it('appends id as the final tie-break', () => {
    expect(orderBy(parseSortParam('name,-created_at'))).toBe('a."name" ASC, a."created_at" DESC, a."id" ASC')
  })

  it('does not repeat id when it is the last key, whatever its order', () => {
    expect(orderBy(parseSortParam('name,-id'))).toBe('a."name" ASC, a."id" DESC')
    expect(orderBy(parseSortParam('id,name'))).toBe('a."id" ASC, a."name" ASC, a."id" ASC')
  })

  it.each([
    ['asset_type_key', 'a."asset_type_key" ASC, a."id" ASC'],
    ['-access_domain_key', 'a."access_domain_key" DESC, a."id" ASC'],
    ['updated_at', 'a."updated_at" ASC, a."id" ASC'],
    ['-properties.cpu_count', `(CASE WHEN jsonb_typeof(a.properties->'cpu_count') = 'number' THEN (a.properties->>'cpu_count')::numeric END) DESC, a."id" ASC`],
    ['properties.memory_gb', `(CASE WHEN jsonb_typeof(a.properties->'memory_gb') = 'number' THEN (a.properties->>'memory_gb')::numeric END) ASC, a."id" ASC`],
    // Text, dates and booleans in byte order; "" and [] are empty (NULL), as on the projection.
    ['properties.hostname', `NULLIF((a.properties->>'hostname') COLLATE "C", '') ASC, a."id" ASC`],
    ['properties.purchased_on', `(a.properties->>'purchased_on') COLLATE "C" ASC, a."id" ASC`],
    ['properties.managed', `(a.properties->>'managed') COLLATE "C" ASC, a."id" ASC`],
    ['properties.tags', `NULLIF(ARRAY(SELECT e COLLATE "C" FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(a.properties->'tags') = 'array' THEN a.properties->'tags' END) e), '{}') ASC, a."id" ASC`],
    // A number on one type, text on another: by its text form.
    ['properties.size', `COALESCE((CASE WHEN jsonb_typeof(a.properties->'size') = 'number' THEN (a.properties->>'size')::numeric END)::text, NULLIF((a.properties->>'size') COLLATE "C", '')) COLLATE "C" ASC, a."id" ASC`],
  ])('sorts assets by %s', (sort, text) => {
    expect(orderBy(parseSortParam(sort))).toBe(text)
  })

  it('sorts a key with several kinds by the kinds of the asset types the filter restricts to', () => {
    const number = `(CASE WHEN jsonb_typeof(a.properties->'size') = 'number' THEN (a.properties->>'size')::numeric END) ASC, a."id" ASC`
    expect(compileOrderBy(parseSortParam('properties.size'), 'assets', mm, 'a', undefined, new Set(['rack']))).toBe(number)
    expect(compileOrderBy(parseSortParam('properties.size'), 'assets', mm, 'a', undefined, new Set(['cable'])))
      .toBe(`NULLIF((a.properties->>'size') COLLATE "C", '') ASC, a."id" ASC`)
    // Both types, or a type that does not define the key (no value to read): the text form.
    expect(compileOrderBy(parseSortParam('properties.size'), 'assets', mm, 'a', undefined, new Set(['rack', 'cable']))).toBe(orderBy(parseSortParam('properties.size')))
    expect(compileOrderBy(parseSortParam('properties.size'), 'assets', mm, 'a', undefined, new Set(['server']))).toBe(orderBy(parseSortParam('properties.size')))
  })

  it.each([
    ['relationship_type_key', 'r."relationship_type_key" ASC, r."id" ASC'],
    ['-source_asset_id', 'r."source_asset_id" DESC, r."id" ASC'],
    ['target_asset_id,-created_at', 'r."target_asset_id" ASC, r."created_at" DESC, r."id" ASC'],
  ])('sorts relationships by %s', (sort, text) => {
    expect(orderBy(parseSortParam(sort), 'relationships')).toBe(text)
  })

  it.each([
    ['nope', 'cannot sort by "nope"; assets sort by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
    ['properties.nope', 'cannot sort by "properties.nope": no asset type in the metamodel defines property "nope"'],
    ['properties.x\'); DROP TABLE assets;--', 'cannot sort by "properties.x\'); DROP TABLE assets;--": no asset type in the metamodel defines property "x\'); DROP TABLE assets;--"'],
    ['relationship_type_key', 'cannot sort by "relationship_type_key"; assets sort by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>'],
  ])('rejects sort=%s on assets', (sort, detail) => {
    expect(caught(() => orderBy(parseSortParam(sort)))).toEqual(invalidSort(detail, { parameter: 'sort' }))
  })

  it.each([
    ['name', 'cannot sort by "name"; relationships sort by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at'],
    ['source_asset.name', 'cannot sort by "source_asset.name"; relationships sort by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at'],
    ['properties.owner', 'cannot sort by "properties.owner"; relationships sort by id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at'],
  ])('rejects sort=%s on relationships', (sort, detail) => {
    expect(caught(() => orderBy(parseSortParam(sort), 'relationships'))).toEqual(invalidSort(detail, { parameter: 'sort' }))
  })

  it('points into the body for a body sort', () => {
    expect(caught(() => orderBy([{ field: 'name', order: 'asc', pointer: '/sort/0' }, { field: 'nope', order: 'desc', pointer: '/sort/1' }]))).toEqual(invalidSort(
      'cannot sort by "nope"; assets sort by id, asset_type_key, name, access_domain_key, created_at, updated_at, properties.<key>', { pointer: '/sort/1/field' }))
  })

  it('adds no values', () => {
    const params = new Params(['org'])
    compileOrderBy(parseSortParam('properties.cpu_count,name'), 'assets', mm, 'a')
    expect(params.values).toEqual(['org'])
  })
})
