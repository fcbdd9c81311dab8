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
      const keys = Object.keys(record)
      keys.sort(NON_ASCII.test(keys.join('')) ? jsonbKeyOrder : asciiKeyOrder)
      text = '{'
      for (let i = 0; i < keys.length; i++) {
        const member = jsonbText(record[keys[i]!])
        if (member === null) return null
        text += (i > 0 ? ', ' : '') + JSON.stringify(keys[i]) + ': ' + member
      }
      return `${text}}`
    }
    default:
      // undefined, functions, symbols, bigints: nothing JSON.parse gives.
      return null
  }
}

/**
 * The SHA-256 (hex) of jsonbText(value) in UTF-8, what
 * `encode(sha256(convert_to(doc::text, 'UTF8')), 'hex')` gives for the stored document; null as
 * jsonbText.
 */
export function jsonbDigest(value: unknown): string | null {
  const text = jsonbText(value)
  return text === null ? null : hash('sha256', text, 'hex')
}

const NON_ASCII = /[^\x00-\x7f]/

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
