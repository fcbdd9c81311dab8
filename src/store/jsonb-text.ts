import { hash } from 'node:crypto'

/*
 * The text PostgreSQL prints for a jsonb value (`value::text`), written here from the value
 * JSON.parse gave: object keys ordered as jsonb stores them (shorter first, then byte by byte),
 * `": "` and `", "` between members, strings escaped as both JSON.stringify and PostgreSQL's
 * escape_json do (the same set: `"`, `\`, \b \f \n \r \t, other controls as \u00xx).
 * A number is the one value whose text can differ: JS writes some with an exponent (1e-7, 1e+21)
 * that numeric prints in full. Such a value has no text here (null), so a caller comparing texts
 * falls back on comparing the values themselves.
 */

/** `value::jsonb::text` as PostgreSQL prints it, or null when it cannot be told here. */
export function jsonbText(value: unknown): string | null {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value)
    case 'boolean':
      return value ? 'true' : 'false'
    case 'number': {
      if (!Number.isFinite(value)) return null
      const text = String(value)
      return text.includes('e') ? null : text
    }
    case 'object': {
      if (value === null) return 'null'
      let text: string
      if (Array.isArray(value)) {
        text = '['
        for (let i = 0; i < value.length; i++) {
          const item = jsonbText(value[i])
          if (item === null) return null
          text += i > 0 ? `, ${item}` : item
        }
        return `${text}]`
      }
      const record = value as Record<string, unknown>
      const { order, heads } = shapeOf(Object.keys(record))
      text = '{'
      for (let i = 0; i < order.length; i++) {
        const member = jsonbText(record[order[i]!])
        if (member === null) return null
        text += heads[i]! + member
      }
      return `${text}}`
    }
    default:
      // undefined, functions, symbols, bigints: nothing JSON.parse gives.
      return null
  }
}

/**
 * Stored documents up to this size (bytes, not compressed) are fingerprinted by their text. A
 * text can be up to 6 times its document (`\u0001` for one byte), so 10,000 of them stay under
 * 60 MB; a full bulk body (8 MB by default) holds items of 800 bytes on average.
 */
const TEXT_FINGERPRINT_BYTES = 1024
const DIGEST = 'sha256:'

/**
 * SQL: a fingerprint of the jsonb document `expr`, to tell in the service whether a value is
 * that document (jsonbMatches). A small document (at most TEXT_FINGERPRINT_BYTES stored and not
 * compressed, so its text stays small) is its text: cheaper to send than to hash on both sides.
 * A larger one is `sha256:` and the SHA-256 (hex) of its text, so that a look-up of 10,000 large
 * documents answers 10,000 short strings. No jsonb text starts with `s`.
 */
export function jsonbFingerprintSql(expr: string): string {
  return `CASE WHEN pg_column_size(${expr}) <= ${TEXT_FINGERPRINT_BYTES} AND pg_column_compression(${expr}) IS NULL THEN ${expr}::text ` +
    `ELSE '${DIGEST}' || encode(sha256(convert_to(${expr}::text, 'UTF8')), 'hex') END`
}

/**
 * Whether `value` (as JSON.parse gave it) is the stored document `fingerprint` was taken of
 * (jsonbFingerprintSql). False also when that cannot be told here (a number JS writes with an
 * exponent): the caller then lets SQL compare. SHA-256, not a shorter hash: a collision would
 * leave a changed document as it was.
 */
export function jsonbMatches(fingerprint: string, value: unknown): boolean {
  if (!fingerprint.startsWith(DIGEST)) return textFrom(fingerprint, 0, value) === fingerprint.length
  const text = jsonbText(value)
  return text !== null && fingerprint.slice(DIGEST.length) === hash('sha256', text, 'hex')
}

// A string that JSON.stringify writes as `"` + itself + `"` has none of these.
const ESCAPED = /["\\\u0000-\u001f]/

/**
 * Where jsonbText(value) ends in `text` if `text` holds it at `at`, else -1: the same pieces as
 * jsonbText, each compared in place, so that no text is built for a document that is stored
 * already (10,000 servers: 8 ms, against 12 to build their texts and compare them). A piece that
 * does not match gives -1, which every later piece keeps.
 */
function textFrom(text: string, at: number, value: unknown): number {
  switch (typeof value) {
    case 'string': {
      if (ESCAPED.test(value)) return piece(text, at, JSON.stringify(value))
      const end = at + 1 + value.length
      return text.charCodeAt(at) === 34 && text.startsWith(value, at + 1) && text.charCodeAt(end) === 34 ? end + 1 : -1
    }
    case 'boolean':
      return piece(text, at, value ? 'true' : 'false')
    case 'number': {
      if (!Number.isFinite(value)) return -1
      const number = String(value)
      return number.includes('e') ? -1 : piece(text, at, number)
    }
    case 'object': {
      if (value === null) return piece(text, at, 'null')
      if (Array.isArray(value)) {
        if (text.charCodeAt(at++) !== 91) return -1
        for (let i = 0; i < value.length && at >= 0; i++) at = textFrom(text, i > 0 ? piece(text, at, ', ') : at, value[i])
        return at >= 0 && text.charCodeAt(at) === 93 ? at + 1 : -1
      }
      const record = value as Record<string, unknown>
      const { order, heads } = shapeOf(Object.keys(record))
      if (text.charCodeAt(at++) !== 123) return -1
      for (let i = 0; i < order.length && at >= 0; i++) at = textFrom(text, piece(text, at, heads[i]!), record[order[i]!])
      return at >= 0 && text.charCodeAt(at) === 125 ? at + 1 : -1
    }
    default:
      return -1
  }
}

/** Where `expected` ends in `text` if `text` holds it at `at`, else -1 (and -1 stays -1). */
function piece(text: string, at: number, expected: string): number {
  return at >= 0 && text.startsWith(expected, at) ? at + expected.length : -1
}

const NON_ASCII = /[^\x00-\x7f]/

/**
 * An object's keys as jsonb orders them, each with what precedes its value in the text
 * (`, "key": `), for the keys in the order Object.keys gives them. Documents of one asset type
 * mostly share their keys, so the order is worked out once per set of keys and remembered
 * (at most SHAPES_KEPT sets: beyond, the memory starts again).
 */
interface Shape {
  keys: readonly string[]
  order: readonly string[]
  heads: readonly string[]
}

const SHAPES_KEPT = 512
const shapes = new Map<string, Shape>()

let lastShape: Shape | null = null

function shapeOf(keys: string[]): Shape {
  // The documents of a bulk mostly have the keys of the one before: no join, no look-up.
  const last = lastShape
  if (last && sameKeys(last.keys, keys)) return last
  return (lastShape = knownShape(keys))
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function knownShape(keys: string[]): Shape {
  const id = keys.join('\0')
  const known = shapes.get(id)
  // Keys holding the separator could join to the same text as other keys: the arrays decide.
  if (known && sameKeys(known.keys, keys)) return known
  const order = [...keys].sort(NON_ASCII.test(id) ? jsonbKeyOrder : asciiKeyOrder)
  const shape = { keys, order, heads: order.map((key, i) => `${i > 0 ? ', ' : ''}${JSON.stringify(key)}: `) }
  if (!known) {
    if (shapes.size >= SHAPES_KEPT) shapes.clear()
    shapes.set(id, shape)
  }
  return shape
}

/** jsonb's order of ASCII keys: one byte per character, so lengths and code units compare as bytes do. */
function asciiKeyOrder(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)
}

/** jsonb's order of object keys: by length in bytes, then byte by byte (UTF-8). */
function jsonbKeyOrder(a: string, b: string): number {
  const x = Buffer.from(a, 'utf8')
  const y = Buffer.from(b, 'utf8')
  return x.length - y.length || Buffer.compare(x, y)
}
