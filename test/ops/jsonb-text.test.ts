import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { jsonbDigest, jsonbText } from '../../src/store/jsonb-text.js'

/**
 * jsonbText (store/jsonb-text.ts) must print what the store prints for the same document, byte
 * for byte, or say it cannot (null): an upsert takes equal digests for unchanged values.
 */
const DOCUMENTS: unknown[] = [
  {},
  [],
  { hostname: 'web-01', environment: 'production', memory_gb: 16, cpu_cores: 8, monitored: true, owner: 'team-a', tags: ['a', 'b'] },
  // jsonb orders keys by length, then bytes: not as JS or JSON.stringify do.
  { bb: 1, a: 2, ccc: 3, ab: 4, B: 5, 'Z z': 6, _: 7, '0': 8, '10': 9 },
  { 'é': 1, e: 2, 'ü': 3, '✓': 4, ab: 5, '🚀': 6, 'ée': 7 },
  { s: 'quote " backslash \\ slash / tab \t newline \n return \r bell \u0007 formfeed \f backspace \b nul-ish \u001f del \u007f' },
  { s: 'ünïcødé ✓ 🚀 \u2028 \u2029 <script>' },
  { n: [0, -0, 1, -1, 0.1, 0.5, 1.5, -2.25, 123.456, 1e20, 12345678901234567000, 9007199254740993, 0.000001, 1 / 3, 2 ** 53] },
  { b: [true, false, null], nested: { z: { y: [1, { x: 'deep' }] }, a: [] }, empty: '' },
  'a string',
  42,
  null,
]
/** Values JS writes with an exponent: numeric prints them in full, so no text here. */
const EXPONENTS = [1e-7, 1e21, -1.5e300, 5e-324]

describe.each(STORES)('%s: jsonbText is the store\'s jsonb text', (kind) => {
  let store: TestStore
  beforeAll(async () => {
    store = await createTestStore(kind)
  })
  afterAll(async () => store?.drop())

  const stored = async (doc: unknown) => (await store.db.query<{ text: string; digest: string }>(
    `SELECT d::text AS text, encode(sha256(convert_to(d::text, 'UTF8')), 'hex') AS digest FROM (SELECT $1::jsonb AS d) x`, [JSON.stringify(doc)])).rows[0]!

  it('prints every document as the store does, and digests it as SQL does', async () => {
    for (const doc of DOCUMENTS) {
      const { text, digest } = await stored(doc)
      expect(jsonbText(doc), JSON.stringify(doc)).toBe(text)
      expect(jsonbDigest(doc)).toBe(digest)
    }
  })

  it('has no text for a number JS writes with an exponent (the store prints it otherwise)', async () => {
    for (const n of EXPONENTS) {
      const { text } = await stored({ n })
      expect(text).not.toBe(`{"n": ${JSON.stringify(n)}}`)
      expect(jsonbText({ n })).toBeNull()
      expect(jsonbDigest([n])).toBeNull()
    }
  })
})
