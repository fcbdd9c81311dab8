import { describe, expect, it } from 'vitest'
import { itemsWhenShort } from '../../../src/core/bounded-lists.js'

describe('itemsWhenShort', () => {
  it('checks the items of a bounded list only when it is short enough, at any depth, leaving the schema given as it was', () => {
    const tags = { type: ['array', 'null'], maxItems: 3, minItems: 1, uniqueItems: true, items: { type: 'string', enum: ['a', 'b'] } }
    const schema = { type: 'object', properties: { tags, rows: { type: 'array', items: tags }, name: { type: 'string' } } }
    const before = structuredClone(schema)
    const bounded = { type: ['array', 'null'], maxItems: 3, minItems: 1, if: { maxItems: 3 }, then: { items: { type: 'string', enum: ['a', 'b'] }, uniqueItems: true } }
    expect(itemsWhenShort(schema)).toEqual({
      type: 'object',
      properties: { tags: bounded, rows: { type: 'array', items: bounded }, name: { type: 'string' } },
    })
    expect(schema).toEqual(before)
  })

  it('leaves unbounded lists, values of enum, const, default and examples, and other schemas as they are', () => {
    const odd = { enum: [{ type: 'array', maxItems: 1, items: {} }], examples: [{ type: 'array', maxItems: 1, items: {} }] }
    expect(itemsWhenShort({ type: 'array', items: { type: 'string' } })).toEqual({ type: 'array', items: { type: 'string' } })
    expect(itemsWhenShort(odd)).toEqual(odd)
    expect(itemsWhenShort({ type: 'string', maxLength: 3 })).toEqual({ type: 'string', maxLength: 3 })
  })
})
