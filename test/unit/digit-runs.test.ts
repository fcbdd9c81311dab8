import { describe, expect, it } from 'vitest'
import { hasLongDigitRun, inexactIntegers, losesDigits } from '../../src/core/json-values.js'

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

describe('inexactIntegers (integers past 2^53 that JSON.parse would round)', () => {
  it('finds every integer literal a 64-bit float cannot hold, outside strings only', () => {
    expect(inexactIntegers('{"n": 9007199254740993}')).toEqual(['9007199254740993'])
    expect(inexactIntegers('[1, -12345678901234567891, 2, 9007199254740995]')).toEqual(['-12345678901234567891', '9007199254740995'])
    // Kept as written, however long: 2^53, 10^20. 2^60 is a float, but one written back as
    // 1152921504606847000 (its shortest form, which JSON.stringify gives the store).
    expect(inexactIntegers('[9007199254740992, 1152921504606846976, 100000000000000000000]')).toEqual(['1152921504606846976'])
    // Within strings (escaped quotes included), with a fraction or an exponent: not integers to keep.
    expect(inexactIntegers('{"id": "9007199254740993", "q": "a \\" 9007199254740993"}')).toEqual([])
    expect(inexactIntegers('[9007199254740993.5, 9007199254740993e0, 1.9007199254740993]')).toEqual([])
    expect(inexactIntegers('')).toEqual([])
    // Past a float's range altogether: reported as out of range, not here.
    expect(inexactIntegers(`[1${'0'.repeat(400)}]`)).toEqual([])
  })

  it('takes an integer written as the store writes it back: its float\'s shortest form, digit for digit', () => {
    // 1.2e25 and 1.5e300 stored, then exported as PostgreSQL writes numerics: all digits.
    const exported = ['12000000000000000000000000', `15${'0'.repeat(299)}`, '-100000000000000000000000', '123456789012345680000']
    for (const token of exported) expect(losesDigits(token), token).toBe(false)
    expect(inexactIntegers(`[${exported.join(', ')}]`)).toEqual([])
    // Digits a float would drop: 2^53 + 1, 20 significant digits, one digit off the shortest form.
    for (const token of ['9007199254740993', '12345678901234567891', '12000000000000000000000001', `15${'0'.repeat(298)}1`]) expect(losesDigits(token), token).toBe(true)
  })

  it('is looked for only where the probe finds 16 digits in a row', () => {
    expect(hasLongDigitRun('{"n": 9007199254740993}', 16)).toBe(true)
    expect(hasLongDigitRun('{"n": 900719925474099}', 16)).toBe(false)
  })
})
