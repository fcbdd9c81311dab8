import { describe, expect, it } from 'vitest'
import { DATE_PATTERN, UNIQUE_KEY_PATTERN } from '../../../src/metamodel/validate.js'

/**
 * The patterns are spelt without `\s` and `\d` so that PostgreSQL reads them as JavaScript does
 * (setup/fit.ts runs them in SQL). Spelt out, they must still mean what the API has always taken.
 */
describe('value patterns shared by the API and kbis apply', () => {
  it('a unique key refuses exactly the path characters, JavaScript\'s white space and U+0085, at every code point', () => {
    const shared = new RegExp(UNIQUE_KEY_PATTERN, 'u')
    const refused = /[:/?#[\]@!$&'()*+,;=\\\s\u0085]/u
    const differ: string[] = []
    for (let c = 0; c <= 0x10ffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue
      const ch = String.fromCodePoint(c)
      if (shared.test(`a${ch}b`) === refused.test(ch)) differ.push(`U+${c.toString(16).padStart(4, '0')}`)
    }
    expect(differ).toEqual([])
  })

  it('a date is four, two and two ASCII digits, year 0000 excluded', () => {
    const date = new RegExp(DATE_PATTERN, 'u')
    const judged = ['2024-01-31', '0001-01-01', '0000-01-01', '99999-01-01', '2024-1-01', '２０２４-01-01', '2024-01-01\n'].map((v) => [v, date.test(v)])
    expect(judged).toEqual([
      ['2024-01-31', true], ['0001-01-01', true], ['0000-01-01', false], ['99999-01-01', false],
      ['2024-1-01', false], ['２０２４-01-01', false], ['2024-01-01\n', false],
    ])
  })
})
