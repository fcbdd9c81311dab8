import { describe, expect, it } from 'vitest'
import { parseFilter } from '../../../src/query/parse.js'
import { parseListFilters } from '../../../src/query/list.js'
import type { FilterNode } from '../../../src/query/ast.js'
import { caught } from './fixtures.js'

const cond = (field: string, operator = 'equals', value: unknown = 'x'): Record<string, unknown> => ({ field, operator, value })

/** `levels` nested `and` groups around one condition. */
function nested(levels: number): unknown {
  let node: unknown = cond('name')
  for (let i = 0; i < levels; i++) node = { and: [node] }
  return node
}

const invalid = (detail: string, pointer: string) => ({ status: 400, code: 'invalid_filter', issues: [{ detail, pointer }] })

describe('parseFilter', () => {
  it('builds the tree of the CONTRACT §4 example with pointers', () => {
    // Setup
    const body = {
      or: [
        { and: [cond('properties.environment', 'equals', 'prod'), cond('properties.cpu_count', 'greater_than_or_equals', 16)] },
        cond('name', 'starts_with', 'db-'),
      ],
    }
    // Action
    const node = parseFilter(body)
    // Assert
    expect(node).toEqual({
      kind: 'or', pointer: '/filter', children: [
        { kind: 'and', pointer: '/filter/or/0', children: [
          { kind: 'condition', field: 'properties.environment', operator: 'equals', value: 'prod', pointer: '/filter/or/0/and/0' },
          { kind: 'condition', field: 'properties.cpu_count', operator: 'greater_than_or_equals', value: 16, pointer: '/filter/or/0/and/1' },
        ] },
        { kind: 'condition', field: 'name', operator: 'starts_with', value: 'db-', pointer: '/filter/or/1' },
      ],
    })
  })

  it('returns frozen nodes', () => {
    const node = parseFilter({ and: [cond('name')] }) as FilterNode & { kind: 'and' }
    expect(Object.isFrozen(node)).toBe(true)
    expect(Object.isFrozen(node.children)).toBe(true)
    expect(Object.isFrozen(node.children[0])).toBe(true)
  })

  it('treats undefined, null and {} as no filter', () => {
    expect(parseFilter(undefined)).toBeNull()
    expect(parseFilter(null)).toBeNull()
    expect(parseFilter({})).toBeNull()
  })

  it('keeps an absent value as undefined (is_empty takes none)', () => {
    expect(parseFilter({ field: 'name', operator: 'is_empty' })).toEqual(
      { kind: 'condition', field: 'name', operator: 'is_empty', value: undefined, pointer: '/filter' })
  })

  it('accepts empty groups', () => {
    expect(parseFilter({ or: [] })).toEqual({ kind: 'or', children: [], pointer: '/filter' })
  })

  it('uses the base pointer given', () => {
    const node = parseFilter({ and: [cond('name')] }, '/relationships/filter')
    expect(node).toEqual({ kind: 'and', pointer: '/relationships/filter', children: [
      { kind: 'condition', field: 'name', operator: 'equals', value: 'x', pointer: '/relationships/filter/and/0' }] })
  })

  it.each([
    ['a string', 'name', '/filter'],
    ['an array', [cond('name')], '/filter'],
    ['a number', 3, '/filter'],
  ])('rejects %s as a node', (_, body, pointer) => {
    expect(caught(() => parseFilter(body))).toEqual(invalid(
      'a filter node must be an object: a condition {"field", "operator", "value"} or a group {"and": [...]} or {"or": [...]}', pointer))
  })

  it('rejects a non-object child with its pointer', () => {
    expect(caught(() => parseFilter({ and: [cond('name'), null] }))).toEqual(invalid(
      'a filter node must be an object: a condition {"field", "operator", "value"} or a group {"and": [...]} or {"or": [...]}', '/filter/and/1'))
  })

  it('rejects a group with both and and or', () => {
    expect(caught(() => parseFilter({ and: [], or: [] }))).toEqual(invalid('a group has exactly one member, "and" or "or", not both', '/filter'))
  })

  it('rejects an unknown member in a group, escaping the pointer token', () => {
    expect(caught(() => parseFilter({ or: [{ and: [], 'x/y~z': 1 }] }))).toEqual(invalid(
      'unknown member "x/y~z" in a group; a group has exactly one member, "and" or "or"', '/filter/or/0/x~1y~0z'))
  })

  it('rejects a group member that is not an array', () => {
    expect(caught(() => parseFilter({ or: [{ and: cond('name') }] }))).toEqual(invalid('"and" must be an array of filter nodes', '/filter/or/0/and'))
  })

  it('rejects an unknown member in a condition', () => {
    expect(caught(() => parseFilter({ and: [{ ...cond('name'), values: [1] }] }))).toEqual(invalid(
      'unknown member "values" in a condition; a condition has "field", "operator" and "value"', '/filter/and/0/values'))
  })

  it('rejects a missing field', () => {
    expect(caught(() => parseFilter({ operator: 'equals', value: 1 }))).toEqual(invalid('a condition needs "field"', '/filter/field'))
  })

  it.each([[''], [12], [null]])('rejects field %j', (field) => {
    expect(caught(() => parseFilter({ field, operator: 'equals', value: 1 }))).toEqual(invalid('field must be a non-empty string', '/filter/field'))
  })

  it('rejects a missing operator', () => {
    expect(caught(() => parseFilter({ field: 'name', value: 1 }))).toEqual(invalid('a condition needs "operator"', '/filter/operator'))
  })

  it('rejects an unknown operator at /filter/or/0/and/1/operator', () => {
    const body = { or: [{ and: [cond('name'), cond('name', 'like')] }] }
    expect(caught(() => parseFilter(body))).toEqual(invalid(
      'unknown operator "like"; operators are equals, not_equals, greater_than, greater_than_or_equals, less_than, '
      + 'less_than_or_equals, contains, not_contains, starts_with, includes, not_includes, in, not_in, is_empty, is_not_empty',
      '/filter/or/0/and/1/operator'))
  })

  it('rejects a non-string operator', () => {
    expect(caught(() => parseFilter(cond('name', 7 as unknown as string)))).toEqual(invalid(
      'unknown operator a non-string; operators are equals, not_equals, greater_than, greater_than_or_equals, less_than, '
      + 'less_than_or_equals, contains, not_contains, starts_with, includes, not_includes, in, not_in, is_empty, is_not_empty',
      '/filter/operator'))
  })
})

describe('parseFilter limits', () => {
  it('accepts exactly 10 group levels', () => {
    expect(parseFilter(nested(10))).not.toBeNull()
  })

  it('rejects 11 group levels at the eleventh group', () => {
    const pointer = `/filter${'/and/0'.repeat(10)}`
    expect(caught(() => parseFilter(nested(11)))).toEqual(invalid('filter groups nest at most 10 levels deep', pointer))
  })

  it('accepts exactly 500 conditions', () => {
    const body = { and: [{ or: Array.from({ length: 250 }, () => cond('name')) }, { or: Array.from({ length: 250 }, () => cond('name')) }] }
    const node = parseFilter(body)
    expect(node?.kind).toBe('and')
  })

  it('rejects the 501st condition', () => {
    const body = { and: [{ or: Array.from({ length: 250 }, () => cond('name')) }, { or: Array.from({ length: 251 }, () => cond('name')) }] }
    expect(caught(() => parseFilter(body))).toEqual(invalid('a filter has at most 500 conditions', '/filter/and/1/or/250'))
  })
})

describe('parseFilter: operand size', () => {
  const BOUND = 'the operands of a filter total at most 10,000 (each string counts its characters, each list its items); narrow the filter or split the search'
  const contains = (value: unknown) => ({ field: 'name', operator: 'contains', value })

  it('accepts operands totalling exactly the bound', () => {
    expect(parseFilter({ or: Array.from({ length: 100 }, () => contains('x'.repeat(100))) })?.kind).toBe('or')
  })

  it('rejects 500 long contains conditions at the condition that passes the bound', () => {
    const body = { or: Array.from({ length: 500 }, () => contains('x'.repeat(200))) }
    expect(caught(() => parseFilter(body))).toEqual(invalid(BOUND, '/filter/or/50/value'))
  })

  it('counts a list by its items, any other value as 1', () => {
    expect(parseFilter({ and: [{ field: 'name', operator: 'in', value: Array.from({ length: 9_998 }, () => 'a-long-value') }, contains('a')] })?.kind).toBe('and')
    const over = { and: [{ field: 'name', operator: 'in', value: Array.from({ length: 9_999 }, () => 'v') }, { field: 'x', operator: 'equals', value: 1 }, contains('a')] }
    expect(caught(() => parseFilter(over))).toEqual(invalid(BOUND, '/filter/and/2/value'))
  })
})

describe('parseListFilters', () => {
  it('reads filter[<field>] parameters into an and of equals conditions, values as strings', () => {
    // Setup
    const query = { 'filter[name]': 'web-01', 'filter[properties.cpu_count]': '16', 'page[size]': 10, sort: 'name' }
    // Action
    const node = parseListFilters(query)
    // Assert
    expect(node).toEqual({ kind: 'and', pointer: '', children: [
      { kind: 'condition', field: 'name', operator: 'equals', value: 'web-01', pointer: '' },
      { kind: 'condition', field: 'properties.cpu_count', operator: 'equals', value: '16', pointer: '' },
    ] })
  })

  it('gives an empty and without filters', () => {
    expect(parseListFilters({ sort: 'name' })).toEqual({ kind: 'and', pointer: '', children: [] })
  })

  it('turns a coerced number back into its string', () => {
    expect(parseListFilters({ 'filter[name]': 16 }).children[0]).toEqual(
      { kind: 'condition', field: 'name', operator: 'equals', value: '16', pointer: '' })
  })

  it('rejects a repeated parameter (an array) naming the parameter', () => {
    expect(caught(() => parseListFilters({ 'filter[name]': ['a', 'b'] }))).toEqual({ status: 400, code: 'invalid_filter', issues: [
      { detail: 'filter[name] is given more than once; a list filter takes one value (search with "in" for several)', parameter: 'filter[name]' }] })
  })

  it('rejects filter[] without a field', () => {
    expect(caught(() => parseListFilters({ 'filter[]': 'a' }))).toEqual({ status: 400, code: 'invalid_filter', issues: [
      { detail: 'filter[] names no field; use filter[<field>]=<value>', parameter: 'filter[]' }] })
  })

  it('rejects an object value', () => {
    expect(caught(() => parseListFilters({ 'filter[name]': { a: 1 } }))).toEqual({ status: 400, code: 'invalid_filter', issues: [
      { detail: 'filter[name] must be a single value', parameter: 'filter[name]' }] })
  })
})
