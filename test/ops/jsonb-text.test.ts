import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { jsonbFingerprintSql, jsonbMatches, jsonbText } from '../../src/store/jsonb-text.js'

/**
 * jsonbText (store/jsonb-text.ts) must print what the store prints for the same document, byte
 * for byte, or say it cannot (null): an upsert takes a matching fingerprint for unchanged values.
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

  const stored = async (doc: unknown) => (await store.db.query<{ text: string; fingerprint: string }>(
    `SELECT d::text AS text, ${jsonbFingerprintSql('d')} AS fingerprint FROM (SELECT $1::jsonb AS d) x`, [JSON.stringify(doc)])).rows[0]!
  /** The fingerprint of a document as stored in a table (compressed when the row is large). */
  const storedInTable = async (doc: unknown): Promise<string> => {
    await store.db.query('CREATE TEMP TABLE IF NOT EXISTS fingerprinted (d jsonb)')
    await store.db.query('TRUNCATE fingerprinted')
    await store.db.query('INSERT INTO fingerprinted VALUES ($1::jsonb)', [JSON.stringify(doc)])
    return (await store.db.query<{ f: string }>(`SELECT ${jsonbFingerprintSql('d')} AS f FROM fingerprinted`)).rows[0]!.f
  }

  it('prints every document as the store does, and its fingerprint matches the document alone', async () => {
    for (const doc of DOCUMENTS) {
      const { text, fingerprint } = await stored(doc)
      expect(jsonbText(doc), JSON.stringify(doc)).toBe(text)
      expect(fingerprint).toBe(text)
      expect(jsonbMatches(fingerprint, doc)).toBe(true)
    }
    const { fingerprint } = await stored({ hostname: 'web-01', memory_gb: 16 })
    for (const other of [{ hostname: 'web-01', memory_gb: 17 }, { hostname: 'web-01' }, { hostname: 'web-01', memory_gb: 16, x: null }, { memory_gb: 16, hostname: 'web-02' }]) {
      expect(jsonbMatches(fingerprint, other)).toBe(false)
    }
    expect(jsonbMatches(fingerprint, { memory_gb: 16, hostname: 'web-01' })).toBe(true)
  })

  it('fingerprints a large or compressed document by the SHA-256 of its text', async () => {
    const large = { notes: Array.from({ length: 300 }, (_, i) => `note ${i} ✓ "${i * 7}"`), n: 1.5 }
    const compressed = { notes: 'x'.repeat(100_000) }
    for (const doc of [large, compressed]) {
      const fingerprint = await storedInTable(doc)
      expect(fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/)
      expect(jsonbMatches(fingerprint, doc)).toBe(true)
      expect(jsonbMatches(fingerprint, { ...doc, n: 2 })).toBe(false)
    }
    // Small, in a table: its text.
    expect(await storedInTable({ a: 1 })).toBe('{"a": 1}')
  })

  it('has no text for a number JS writes with an exponent (the store prints it otherwise)', async () => {
    for (const n of EXPONENTS) {
      const { text, fingerprint } = await stored({ n })
      expect(text).not.toBe(`{"n": ${JSON.stringify(n)}}`)
      expect(jsonbText({ n })).toBeNull()
      expect(jsonbMatches(fingerprint, { n })).toBe(false)
    }
  })
})

describe('jsonbMatches compares a value with a stored text in place', () => {
  it('matches only the value the text was printed from', () => {
    const pairs: [unknown, unknown][] = [
      [{ n: 12 }, { n: 1 }],
      [{ n: 1 }, { n: 12 }],
      [{ s: 'ab' }, { s: 'a' }],
      [{ s: 'a"b' }, { s: 'a\\"b' }],
      [{ s: 'line\nbreak' }, { s: 'line\\nbreak' }],
      [{ a: [1, 2] }, { a: [1, 2, 3] }],
      [{ a: [1, 2, 3] }, { a: [1, 2] }],
      [{ a: [[]] }, { a: [] }],
      [{ o: { x: 1 } }, { o: { x: 1, y: 2 } }],
      [{ o: { x: 1, y: 2 } }, { o: { y: 2 } }],
      [{ b: true }, { b: 'true' }],
      [{ z: null }, { z: 'null' }],
      [{ k: 1 }, { K: 1 }],
      [{}, []],
      ['x', { x: 1 }],
    ]
    for (const [stored, other] of pairs) {
      const text = jsonbText(stored)!
      expect(jsonbMatches(text, stored), text).toBe(true)
      expect(jsonbMatches(text, other), `${text} against ${JSON.stringify(other)}`).toBe(false)
      // A text with more after it is another document.
      expect(jsonbMatches(`${text} `, stored)).toBe(false)
    }
  })
})

describe('jsonbText remembers key orders by their key sets', () => {
  it('keeps documents apart whose keys join to the same text', () => {
    expect(jsonbText({ b: 2, a: 1 })).toBe('{"a": 1, "b": 2}')
    expect(jsonbText({ a: 1, b: 2 })).toBe('{"a": 1, "b": 2}')
    // Keys holding the separator the memory joins keys with.
    expect(jsonbText({ 'a\u0000b': 1 })).toBe('{"a\\u0000b": 1}')
    expect(jsonbText({ a: 1, b: 2 })).toBe('{"a": 1, "b": 2}')
    expect(jsonbText({ a: { c: 1, bb: 2 }, b: [] })).toBe('{"a": {"c": 1, "bb": 2}, "b": []}')
  })
})
