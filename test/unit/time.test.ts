import { describe, expect, it } from 'vitest'
import { formatUuid, isUuid, isoSecond, newId } from '../../src/core/time.js'
import { parse as parseUuid, stringify as stringifyUuid } from 'uuid'
import { ISO_SECOND, parseJsonTimestamptz, parseTimestamptz, type StoreDate } from '../../src/store/timestamps.js'

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

  it('writes ids as uuid writes them, whatever the bytes', () => {
    for (const id of Array.from({ length: 200 }, () => newId())) expect(stringifyUuid(parseUuid(id))).toBe(id)
    const bytes = Uint8Array.from({ length: 16 }, (_, i) => (i * 37 + 250) & 0xff)
    bytes[6] = 0x7a // uuid's stringify checks the version and variant bits
    bytes[8] = 0xbf
    expect(formatUuid(bytes)).toBe(stringifyUuid(bytes))
    expect(formatUuid(new Uint8Array(16).fill(0xff))).toBe('ffffffff-ffff-ffff-ffff-ffffffffffff')
  })

  it('draws fresh random bits for each id, not only a counter', () => {
    const ids = Array.from({ length: 1_000 }, () => newId())
    // The last 8 hex digits come from the random pool alone: 1,000 of them barely ever collide.
    expect(new Set(ids.map((id) => id.slice(-8))).size).toBeGreaterThan(990)
  })
})

describe('timestamptz from the store', () => {
  it('parses the UTC form at once and keeps its second for isoSecond', () => {
    const d = parseTimestamptz('2026-01-31 09:15:07.123456+00')
    expect(d.toISOString()).toBe('2026-01-31T09:15:07.123Z')
    expect(isoSecond(d)).toBe('2026-01-31T09:15:07Z')
    expect(isoSecond(parseTimestamptz('2026-01-31 09:15:07+00'))).toBe('2026-01-31T09:15:07Z')
  })

  it('hands every other form to the general parser, with the same instant', () => {
    const d = parseTimestamptz('2026-01-31 11:15:07.9+02')
    expect(d.toISOString()).toBe('2026-01-31T09:15:07.900Z')
    expect(isoSecond(d)).toBe('2026-01-31T09:15:07Z')
    expect(parseTimestamptz('2026-01-31 09:15:07+05:30').toISOString()).toBe('2026-01-31T03:45:07.000Z')
    expect(parseTimestamptz('infinity')).toBe(Infinity)
  })

  it('reads the JSON form (json_agg of a UTC session) the same way', () => {
    const d: StoreDate = parseJsonTimestamptz('2026-01-31T09:15:07.123456+00:00')
    expect(d.toISOString()).toBe('2026-01-31T09:15:07.123Z')
    expect(d[ISO_SECOND]).toBe('2026-01-31T09:15:07Z')
    expect(isoSecond(parseJsonTimestamptz('2026-01-31T09:15:07+00:00'))).toBe('2026-01-31T09:15:07Z')
    const shifted: StoreDate = parseJsonTimestamptz('2026-01-31T11:15:07.9+02:00')
    expect(shifted.toISOString()).toBe('2026-01-31T09:15:07.900Z')
    expect(shifted[ISO_SECOND]).toBeUndefined()
    expect(isoSecond(shifted)).toBe('2026-01-31T09:15:07Z')
  })

  it('formats any other Date or string to the second, truncating', () => {
    expect(isoSecond(new Date('2026-01-31T09:15:07.999Z'))).toBe('2026-01-31T09:15:07Z')
    expect(isoSecond('2026-01-31T09:15:07.5Z')).toBe('2026-01-31T09:15:07Z')
    expect(isoSecond(null)).toBeNull()
  })
})
