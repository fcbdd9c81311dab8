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
  let text = ''
  return writeJsonb(value, (piece) => {
    text += piece
    return true
  }) ? text : null
}

// A string that JSON.stringify writes as `"` + itself + `"` has none of these (surrogates: a lone
// one is escaped; a paired one is not, which JSON.stringify tells).
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/

/**
 * Hands the pieces of jsonbText(value) to `put`, in order, and says whether all were taken: false
 * as soon as `put` refuses one, or when the text cannot be told here (a number with an exponent,
 * nothing JSON.parse gives). One writer for both uses: building the text, and comparing a stored
 * text with a value in place (jsonbMatches), without building it.
 */
function writeJsonb(value: unknown, put: (piece: string) => boolean): boolean {
  switch (typeof value) {
    case 'string':
      return ESCAPED.test(value) ? put(JSON.stringify(value)) : put('"') && put(value) && put('"')
    case 'boolean':
      return put(value ? 'true' : 'false')
    case 'number': {
      if (!Number.isFinite(value)) return false
      const text = String(value)
      return !text.includes('e') && put(text)
    }
    case 'object': {
      if (value === null) return put('null')
      if (Array.isArray(value)) {
        if (!put('[')) return false
        for (let i = 0; i < value.length; i++) {
          if ((i > 0 && !put(', ')) || !writeJsonb(value[i], put)) return false
        }
        return put(']')
      }
      const record = value as Record<string, unknown>
      const { order, heads } = shapeOf(Object.keys(record))
      if (!put('{')) return false
      for (let i = 0; i < order.length; i++) {
        if (!put(heads[i]!) || !writeJsonb(record[order[i]!], put)) return false
      }
      return put('}')
    }
    default:
      // undefined, functions, symbols, bigints: nothing JSON.parse gives.
      return false
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
  if (fingerprint.startsWith(DIGEST)) {
    const text = jsonbText(value)
    return text !== null && fingerprint.slice(DIGEST.length) === hash('sha256', text, 'hex')
  }
  // The text, piece by piece in place: no text is built for a document that is stored already.
  let at = 0
  return writeJsonb(value, (piece) => {
    if (!fingerprint.startsWith(piece, at)) return false
    at += piece.length
    return true
  }) && at === fingerprint.length
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
