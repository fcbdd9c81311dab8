import { describe, expect, it } from 'vitest'
import { isUuid, newId } from '../../src/core/time.js'

describe('newId', () => {
  it('makes RFC 9562 version-7 UUIDs carrying the current millisecond', () => {
    const before = Date.now()
    const id = newId()
    expect(isUuid(id)).toBe(true)
    expect(id[14]).toBe('7')
    expect(['8', '9', 'a', 'b']).toContain(id[19])
    const msecs = parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
    expect(msecs).toBeGreaterThanOrEqual(before)
    expect(msecs).toBeLessThanOrEqual(Date.now() + 1)
  })

  it('never repeats and sorts in creation order across many pool refills', () => {
    const ids = Array.from({ length: 20_000 }, () => newId())
    expect(new Set(ids).size).toBe(ids.length)
    const sorted = [...ids].sort()
    expect(sorted).toEqual(ids)
  })

  it('draws fresh random bits for each id, not only a counter', () => {
    const ids = Array.from({ length: 1_000 }, () => newId())
    // The last 8 hex digits come from the random pool alone: 1,000 of them barely ever collide.
    expect(new Set(ids.map((id) => id.slice(-8))).size).toBeGreaterThan(990)
  })
})
