import { describe, expect, it } from 'vitest'
import { CompositeKeyMap } from '../../../src/refs/resolve.js'

describe('CompositeKeyMap: values by (asset type, unique value)', () => {
  const rows = [
    { id: 'a', asset_type_key: 'server', unique_value: 'web-1' },
    { id: 'b', asset_type_key: 'application', unique_value: 'web-1' },
    { id: 'c', asset_type_key: 'server', unique_value: null },
  ]

  it('tells the same unique value of two types apart and names no row without a value', () => {
    const map = CompositeKeyMap.of(rows)
    expect(map.get({ asset_type_key: 'server', unique_value: 'web-1' })?.id).toBe('a')
    expect(map.get({ asset_type_key: 'application', unique_value: 'web-1' })?.id).toBe('b')
    expect(map.get({ asset_type_key: 'server', unique_value: null })).toBeUndefined()
    expect(map.get({ asset_type_key: 'server', unique_value: '' })).toBeUndefined()
    expect(map.get({ asset_type_key: 'note', unique_value: 'web-1' })).toBeUndefined()
  })

  it('keeps the last value set for a key, as a Map does', () => {
    const map = new CompositeKeyMap<number>()
    map.set('server', 'web-1', 0)
    map.set('server', 'web-1', 3)
    map.set('server', 'web-2', 1)
    expect([map.get({ asset_type_key: 'server', unique_value: 'web-1' }), map.get({ asset_type_key: 'server', unique_value: 'web-2' })]).toEqual([3, 1])
  })
})
