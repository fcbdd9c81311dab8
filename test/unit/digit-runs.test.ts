import { describe, expect, it } from 'vitest'
import { hasLongDigitRun } from '../../src/core/http-input.js'

describe('hasLongDigitRun (a number too long for a 64-bit float may hide in a body)', () => {
  it('finds 100 digits in a row wherever the run starts, and nothing shorter', () => {
    for (let start = 0; start < 230; start++) {
      for (const length of [99, 100, 101]) {
        const text = `${'x'.repeat(start)}${'7'.repeat(length)}"${'12,'.repeat(50)}`
        expect(hasLongDigitRun(text), `run of ${length} at ${start}`).toBe(length >= 100)
      }
    }
  })

  it('measures runs across the positions it looks at: digits broken every 99 are no run', () => {
    expect(hasLongDigitRun(`${'9'.repeat(99)},`.repeat(1000))).toBe(false)
    expect(hasLongDigitRun(`${`${'9'.repeat(99)},`.repeat(500)}${'9'.repeat(100)}`)).toBe(true)
    expect(hasLongDigitRun('')).toBe(false)
  })
})
