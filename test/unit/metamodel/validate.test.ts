import { describe, expect, it } from 'vitest'
import { compilePropertiesValidator } from '../../../src/metamodel/validate.js'
import type { PropertyDefinition } from '../../../src/metamodel/types.js'

function def(key: string, type: PropertyDefinition['type'], extra: Partial<PropertyDefinition> = {}): PropertyDefinition {
  return { key, asset_type_key: 'rack', name: key, description: null, type, required: false, options: null, currency: null, min: null, max: null, ...extra }
}

const validator = (...properties: PropertyDefinition[]) =>
  compilePropertiesValidator({ key: 'rack', name: 'Rack', description: null, unique_property_key: null, properties })

describe('the properties validator: lists', () => {
  const tags = def('tags', 'multi_select', { options: ['a', 'b', 'c'] })
  const required = def('zones', 'multi_select', { options: ['n', 's'], required: true })
  const validate = validator(tags, required)

  it('takes distinct options, at most as many as there are', () => {
    expect(validate({ tags: ['c', 'a', 'b'], zones: ['n'] }, '')).toEqual([])
  })

  it.each<[string, unknown]>([
    ['a repeated option', ['a', 'a']],
    ['an unknown option', ['a', 'x']],
    ['more values than options', ['a', 'b', 'c', 'a']],
    ['a million values', Array(1_000_000).fill(7)],
  ])('refuses %s with one failure', (_, value) => {
    expect(validate({ tags: value, zones: ['s'] }, '/0/properties')).toEqual([
      { detail: 'tags must be a list of distinct values from a, b, c', pointer: '/0/properties/tags' },
    ])
  })

  it('says that an empty list of a required property is none', () => {
    expect(validate({ zones: [] }, '')).toEqual([{ detail: 'zones is required for asset type rack: an empty value ([]) is none', pointer: '/zones' }])
  })
})

describe('the properties validator: options in a failure', () => {
  const options = Array.from({ length: 250 }, (_, i) => `option-${i}`)
  const validate = validator(def('kind', 'select', { options }), def('kinds', 'multi_select', { options }), def('size', 'select', { options: ['s', 'm'] }))

  it('names the first ten of many options and where to read them all', () => {
    const listed = `${options.slice(0, 10).join(', ')}, … (250 options: GET /api/v1/metamodel/asset-types/rack lists them)`
    expect(validate({ kind: 'x', kinds: ['x'], size: 'x' }, '')).toEqual([
      { detail: `kind must be one of ${listed}`, pointer: '/kind' },
      { detail: `kinds must be a list of distinct values from ${listed}`, pointer: '/kinds' },
      { detail: 'size must be one of s, m', pointer: '/size' },
    ])
  })
})

describe('the properties validator: bounds', () => {
  it('names the range a number must fall in as kbis apply does: from min to max, or the one bound there is', () => {
    const validate = validator(def('slots', 'integer', { min: 0, max: 1000 }), def('load', 'number', { min: 0.5 }), def('fans', 'integer', { max: 8 }))
    expect(validate({ slots: 5000, load: 0.1, fans: 9 }, '')).toEqual([
      { detail: 'slots must be an integer from 0 to 1000', pointer: '/slots' },
      { detail: 'load must be a number ≥ 0.5', pointer: '/load' },
      { detail: 'fans must be an integer ≤ 8', pointer: '/fans' },
    ])
  })
})
