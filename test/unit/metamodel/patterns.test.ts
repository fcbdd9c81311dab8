import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { fullFormats } from 'ajv-formats/dist/formats.js'
import { DATE_PATTERN, UNIQUE_KEY_PATTERN, URI_PATTERN } from '../../../src/metamodel/validate.js'

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

  it('a URL is what ajv-formats\' `uri` format takes, without its `i` flag or `\\d`', () => {
    const uri = new RegExp(URI_PATTERN)
    const ajvUri = fullFormats.uri as (value: string) => boolean
    const judged = ['https://example.com/a?b=1#c', 'HTTPS://EXAMPLE.COM/%C3%A4', 'Mailto:a@b.test', 'http://[::1]:8080/', 'http://[V1.x]/',
      'http://192.168.0.1:80/', 'urn:isbn:1', 'a:b', 'http://[::1', 'x:%zz', 'x:%aF', 'http://exa%mple', 'example.com', 'http://a b', '', 'http://ex.com/ä', 'http://١٢٣/']
    expect(judged.filter((v) => uri.test(v) !== ajvUri(v))).toEqual([])
    expect(judged.filter((v) => uri.test(v))).toEqual(['https://example.com/a?b=1#c', 'HTTPS://EXAMPLE.COM/%C3%A4', 'Mailto:a@b.test', 'http://[::1]:8080/',
      'http://[V1.x]/', 'http://192.168.0.1:80/', 'urn:isbn:1', 'a:b', 'x:%aF'])
    // Generated strings from the characters URIs are made of, and a few others.
    const chars = fc.constantFrom(...'aZ09:/?#[]@!$&\'()*+,;=-._~%fFvV \u00e4\u0661'.split(''))
    const text = fc.oneof(fc.string({ unit: chars, maxLength: 24 }), fc.string({ unit: chars, maxLength: 16 }).map((s) => `http://${s}`), fc.string({ unit: chars, maxLength: 16 }).map((s) => `x:${s}`))
    fc.assert(fc.property(text, (value) => uri.test(value) === ajvUri(value)), { numRuns: 20_000, seed: 20261201 })
  })
})
