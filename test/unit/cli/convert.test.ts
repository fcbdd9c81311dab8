import { describe, expect, it } from 'vitest'
import { CellError, convertCell, ndjsonItem } from '../../../src/cli/sync/convert.js'

const refusal = (type: string, cell: string): string => {
  try {
    convertCell({ key: 'n', type }, cell)
  } catch (err) {
    if (err instanceof CellError) return err.message
    throw err
  }
  return 'accepted'
}

describe('kbis import: number cells', () => {
  it('reads plain decimal numbers: sign, digits, fraction, exponent', () => {
    expect(['7', '-7', '+7', '15.5', '-0.25', '1e3', '2.5E-2', '007'].map((cell) => convertCell({ key: 'n', type: 'number' }, cell)))
      .toEqual([7, -7, 7, 15.5, -0.25, 1000, 0.025, 7])
    expect(convertCell({ key: 'n', type: 'integer' }, '42')).toBe(42)
  })

  it('refuses anything else as it refuses a word: hexadecimal, binary, octal, spaces, Infinity', () => {
    for (const type of ['number', 'integer', 'score']) {
      expect(['0x10', '0b11', '0o7', ' 7 ', '7 ', '1_000', '.5', '5.', 'Infinity', '1e999', 'eight'].map((cell) => refusal(type, cell))).toEqual(
        ['"0x10"', '"0b11"', '"0o7"', '" 7 "', '"7 "', '"1_000"', '".5"', '"5."', '"Infinity"', '"1e999"', '"eight"'].map((cell) => `n must be a number, not ${cell}`))
    }
  })
})

describe('kbis import: NDJSON lines', () => {
  const type = { key: 'note', unique_property_key: null, properties: [{ key: 'body', type: 'text' }] }
  const refusals = (record: unknown): { field: string; message: string }[] => {
    try {
      ndjsonItem(type, record)
    } catch (err) {
      return ((err as AggregateError).errors as CellError[]).map((e) => ({ field: e.field, message: e.message }))
    }
    return []
  }

  it('takes a record as kbis export writes it', () => {
    const exported = { id: '01a21f8f-8a31-70d4-8529-9f7dfff8c851', asset_type_key: 'note', name: 'n', access_domain_key: 'it', properties: { body: 'b' }, created_at: '2026-01-31T09:15:00Z', updated_at: '2026-01-31T09:15:00Z' }
    expect(ndjsonItem(type, exported)).toEqual({ name: 'n', access_domain_key: 'it', properties: { body: 'b' } })
  })

  it('refuses a member a record does not have, each by its name, as POST /assets does', () => {
    const fields = 'a line has name, access_domain_key, properties (and asset_type_key, id, created_at, updated_at as kbis export writes them)'
    expect(refusals({ name: 'nd4', bogus: 1, nmae: 'typo', properties: { body: 'x' } })).toEqual([
      { field: 'bogus', message: `unknown field "bogus": ${fields}` },
      { field: 'nmae', message: `unknown field "nmae": ${fields}` },
    ])
    expect(refusals({ name: 'n', relationships: [] })).toEqual([{ field: 'relationships', message: `unknown field "relationships": ${fields}` }])
  })

  it('takes asset_type_key null as no type (an empty cell of the CSV column) and refuses another type', () => {
    expect(ndjsonItem(type, { asset_type_key: null, name: 'n' })).toEqual({ name: 'n', properties: {} })
    expect(refusals({ asset_type_key: 'server', name: 'n' })).toEqual([{ field: 'asset_type_key', message: 'asset_type_key is "server", not note (--type)' }])
    expect(refusals({ asset_type_key: '', name: 'n' })).toEqual([{ field: 'asset_type_key', message: 'asset_type_key is "", not note (--type)' }])
  })
})
