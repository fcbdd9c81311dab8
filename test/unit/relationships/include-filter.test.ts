import { describe, expect, it } from 'vitest'
import { Params } from '../../../src/store/sql.js'
import { compileIncludeFilter, type IncludeFilter } from '../../../src/relationships/include-sql.js'

const cond = (field: string, operator: string, ...values: string[]) => ({ kind: 'condition', field, operator, values }) as const
const compile = (filter: unknown, direction = 'b.direction') => {
  const params = new Params(['org'])
  return { sql: compileIncludeFilter(filter as IncludeFilter, params, direction), params: params.values.slice(1) }
}

/** The filter of included relationships (a search body's tree, or the query string's `and` of `in`s) as SQL over `b` and `o`. */
describe('compileIncludeFilter', () => {
  it('compiles no filter and empty groups to constants', () => {
    expect(compile(null)).toEqual({ sql: 'TRUE', params: [] })
    expect(compile({ kind: 'and', children: [] })).toEqual({ sql: 'TRUE', params: [] })
    expect(compile({ kind: 'or', children: [] })).toEqual({ sql: 'FALSE', params: [] })
  })

  it('compiles each operator, values as parameters, fields from its own map', () => {
    expect(compile(cond('relationship_type_key', 'equals', 'runs_on'))).toEqual({ sql: 'b.relationship_type_key = $2::text', params: ['runs_on'] })
    expect(compile(cond('related_asset.asset_type_key', 'not_equals', 'server'))).toEqual({ sql: 'o.asset_type_key <> $2::text', params: ['server'] })
    expect(compile(cond('relationship_type_key', 'in', 'a', 'b'))).toEqual({ sql: 'b.relationship_type_key = ANY($2::text[])', params: [['a', 'b']] })
    expect(compile(cond('related_asset.name', 'not_in', 'x'))).toEqual({ sql: 'NOT (o.name = ANY($2::text[]))', params: [['x']] })
    expect(compile(cond('related_asset.name', 'contains', '50%_off\\'))).toEqual({
      sql: 'o.name COLLATE "default" ILIKE $2 ESCAPE \'\\\'', params: ['%50\\%\\_off\\\\%'],
    })
    expect(compile(cond('related_asset.name', 'not_contains', 'db'))).toEqual({ sql: 'NOT (o.name COLLATE "default" ILIKE $2 ESCAPE \'\\\')', params: ['%db%'] })
    expect(compile(cond('related_asset.name', 'starts_with', 'db-'))).toEqual({ sql: 'o.name COLLATE "default" ILIKE $2 ESCAPE \'\\\'', params: ['db-%'] })
  })

  it('nests groups in parentheses and reads the direction from the expression it is given', () => {
    const tree = { kind: 'or', children: [cond('direction', 'equals', 'incoming'), { kind: 'and', children: [cond('relationship_type_key', 'in', 'runs_on'), cond('direction', 'not_equals', 'incoming')] }] }
    expect(compile(tree)).toEqual({
      sql: '(b.direction = $2::text OR (b.relationship_type_key = ANY($3::text[]) AND b.direction <> $4::text))',
      params: ['incoming', ['runs_on'], 'incoming'],
    })
    // The self-loop check compiles the same tree as if the row were the outgoing one.
    expect(compile(tree, "'outgoing'::text").sql).toBe("('outgoing'::text = $2::text OR (b.relationship_type_key = ANY($3::text[]) AND 'outgoing'::text <> $4::text))")
  })
})
