import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'

/**
 * docs/configuration.md: kbis apply checks live values in SQL "with the same rules as the API's
 * validation". Each value below is held as text, then judged twice: by the API (an asset written
 * with it as a date or a unique key) and by apply (the text property changed to that type). Both
 * must say the same, and what they say is the expected validity beside the value.
 */
type Case = [label: string, value: string, valid: boolean]

const DATES: Case[] = [
  ['a day', '2024-01-31', true],
  ['29 February of a leap year', '2024-02-29', true],
  ['29 February of 2000', '2000-02-29', true],
  ['29 February of another year', '2023-02-29', false],
  ['29 February of 1900', '1900-02-29', false],
  ['31 April', '2024-04-31', false],
  ['month 13', '2024-13-01', false],
  ['month 00', '2024-00-10', false],
  ['day 00', '2024-01-00', false],
  ['the first year', '0001-01-01', true],
  ['the last year', '9999-12-31', true],
  ['year 0000', '0000-01-01', false],
  ['29 February of year 0000', '0000-02-29', false],
  ['a five-digit year', '99999-01-01', false],
  ['a signed year', '+2024-01-01', false],
  ['a one-digit month', '2024-1-01', false],
  ['a one-digit day', '2024-01-1', false],
  ['a timestamp', '2024-01-01T00:00:00Z', false],
  ['a date and a time', '2024-01-01 00:00', false],
  ['a trailing new line', '2024-01-01\n', false],
  ['a leading space', ' 2024-01-01', false],
  ['slashes', '2024/01/01', false],
  ['full-width digits', '２０２４-01-01', false],
  ['Arabic-Indic digits', '٢٠٢٤-01-01', false],
  ['empty', '', false],
]

const UNIQUE_KEYS: Case[] = [
  ['plain', 'web-01', true],
  ['allowed punctuation', 'a.b_c~d%e"f<g>h{i}j|k^l`m', true],
  ['letters of other scripts', 'été-日本', true],
  ['500 characters', 'x'.repeat(500), true],
  ['501 characters', 'x'.repeat(501), false],
  ['500 astral characters', '😀'.repeat(500), true],
  ['501 astral characters', '😀'.repeat(501), false],
  ['empty', '', false],
  ['a space', 'a b', false],
  ['a slash', 'a/b', false],
  ['a backslash', 'a\\b', false],
  ['a bracket', 'a[b', false],
  ['a quote', "a'b", false],
  ['tab', 'a\tb', false],
  ['line tabulation U+000B', 'a\u000bb', false],
  ['new line at the end', 'ab\n', false],
  ['no-break space U+00A0', 'a\u00a0b', false],
  ['byte order mark U+FEFF', 'a\ufeffb', false],
  ['next line U+0085', 'a\u0085b', false],
  ['ogham space U+1680', 'a\u1680b', false],
  ['em space U+2003', 'a\u2003b', false],
  ['figure space U+2007', 'a\u2007b', false],
  ['hair space U+200A', 'a\u200ab', false],
  ['line separator U+2028', 'a\u2028b', false],
  ['paragraph separator U+2029', 'a\u2029b', false],
  ['narrow no-break space U+202F', 'a\u202fb', false],
  ['medium mathematical space U+205F', 'a\u205fb', false],
  ['ideographic space U+3000', 'a\u3000b', false],
  // Not white space to JavaScript's \s (some C libraries count the first ones as space).
  ['file separator U+001C', 'a\u001cb', true],
  ['unit separator U+001F', 'a\u001fb', true],
  ['Mongolian vowel separator U+180E', 'a\u180eb', true],
  ['zero width space U+200B', 'a\u200bb', true],
]

const HELD = [...DATES.map(([, value]) => value), ...UNIQUE_KEYS.map(([, value]) => value)]

/** ACME plus asset type `held`: one text property per value, `v<index>`, or `type` for `changed`. */
function setup(changed?: { index: number; type: string }): SetupFile {
  const s = structuredClone(ACME) as unknown as { metamodel: { asset_types: unknown[] } }
  const properties = HELD.map((_, i) => ({ key: `v${i}`, type: i === changed?.index ? changed.type : 'text' }))
  s.metamodel.asset_types.push({ key: 'held', name: 'Held', properties })
  return s as unknown as SetupFile
}

for (const store of STORES) {
  describe(`${store}: kbis apply judges stored values as the API does`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store, setup())
      // Every held value is written through the API before any apply, while all are text.
      for (const [i, value] of HELD.entries()) {
        const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'held', name: `held ${i}`, properties: { [`v${i}`]: value } } })
        expect(res.status).toBe(201)
      }
    })
    afterAll(async () => t.close())

    /** 201 or 422 for a server holding `properties`; anything else fails the test. */
    async function apiAccepts(name: string, properties: Record<string, unknown>): Promise<boolean> {
      const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'server', name, properties: { hostname: name, ...properties } } })
      expect([201, 422]).toContain(res.status)
      return res.status === 201
    }

    /**
     * Whether apply takes `v<index>` becoming `type` (then `v<index>` becomes text again), or the
     * refusal it gave, with `v<index>` written `v`.
     */
    async function applyJudges(index: number, type: string): Promise<true | string> {
      try {
        await applySetup(t.store.db, setup({ index, type }))
      } catch (err) {
        return (err as Error).message.replace(`held.v${index} `, 'held.v ')
      }
      await applySetup(t.store.db, setup())
      return true
    }

    /** Each case judged by both; every refusal by apply must be `refusal`. */
    async function judge(cases: Case[], first: number, type: string, api: (i: number, value: string) => Promise<boolean>, refusal: string) {
      const judged = []
      const refusals = new Set<string>()
      for (const [i, [label, value]] of cases.entries()) {
        const apply = await applyJudges(first + i, type)
        if (apply !== true) refusals.add(apply)
        judged.push({ label, api: await api(i, value), apply: apply === true })
      }
      expect(judged).toEqual(cases.map(([label, , valid]) => ({ label, api: valid, apply: valid })))
      expect([...refusals]).toEqual([`organization acme: cannot change the type of property held.v from text to ${type}: 1 live asset has ${refusal}`])
    }

    it('dates: the same values are real calendar days to both', async () => {
      await judge(DATES, 0, 'date', (i, value) => apiAccepts(`date-${i}`, { purchased_on: value }), 'a value that is not a date YYYY-MM-DD')
    })

    it('unique keys: the same values are valid keys to both', async () => {
      await judge(UNIQUE_KEYS, DATES.length, 'unique_key', (i, value) => apiAccepts(`key-${i}`, { hostname: value }),
        "a value that is not a unique key (non-empty, at most 500 characters, without white space or any of : / ? # [ ] @ ! $ & ' ( ) * + , ; = \\)")
    })
  })
}
