/** Cells of an import file → API values, by the property's type (CONTRACT §16). */

import { losesDigits } from '../../core/json-values.js'

export interface PropertyInfo {
  key: string
  type: string
}

export interface AssetTypeInfo {
  key: string
  unique_property_key: string | null
  properties: PropertyInfo[]
}

export class CellError extends Error {
  constructor(readonly field: string, message: string) {
    super(message)
  }
}

const NUMBER_TYPES = new Set(['number', 'integer', 'percentage', 'currency', 'score'])

/**
 * A plain decimal number: optional sign, digits, optional fraction, optional exponent. Not what
 * else JavaScript's Number() reads (`0x10`, `0b11`, `0o7`, spaces around, `Infinity`): a cell
 * such as `0x10` is a typo or another tool's notation, not 16.
 */
const DECIMAL = /^[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/

/**
 * One CSV cell as the property's value; `undefined` for an empty cell (not set). Numbers must be
 * plain decimal numbers, booleans `true`/`false`, a multi-select its options joined by `|`; dates
 * and everything else go as text (the server checks `YYYY-MM-DD`, options, …).
 */
export function convertCell(property: PropertyInfo, cell: string): unknown {
  if (cell === '') return undefined
  if (NUMBER_TYPES.has(property.type)) {
    const n = Number(cell)
    if (!DECIMAL.test(cell) || !Number.isFinite(n)) throw new CellError(property.key, `${property.key} must be a number, not ${JSON.stringify(cell)}`)
    // As the server refuses it in a body: an integer a 64-bit float would round is not sent rounded.
    if (/^[+-]?\d{16,}$/.test(cell) && losesDigits(cell.replace(/^\+/, ''))) {
      throw new CellError(property.key, `${property.key}: the number ${cell} cannot be kept exactly (integers beyond ±9007199254740991 lose digits in a 64-bit float)`)
    }
    return n
  }
  if (property.type === 'boolean') {
    if (cell === 'true') return true
    if (cell === 'false') return false
    throw new CellError(property.key, `${property.key} must be true or false, not ${JSON.stringify(cell)}`)
  }
  if (property.type === 'multi_select') return cell.split('|')
  return cell
}

// Columns an export writes that an import does not send (the server assigns them).
const IGNORED_COLUMNS = new Set(['id', 'created_at', 'updated_at'])
// The fields of a record as kbis export writes it, besides its properties.
const RECORD_FIELDS = ['name', 'access_domain_key', 'asset_type_key', ...IGNORED_COLUMNS]

/**
 * Checks a CSV header against the type: every column is a field or one of its property keys, and
 * names one cell (a column given twice would leave it unclear which cell counts); with `upsert`,
 * the unique key's column is there (it names each row's asset: without it every row is refused).
 */
export function checkColumns(type: AssetTypeInfo, columns: string[], upsert = false): void {
  // An empty name (a comma at the end of the line, two in a row) would be listed as unknown, unseen.
  const unnamed = columns.flatMap((c, i) => (c.trim() === '' ? [i + 1] : []))
  if (unnamed.length > 0) {
    const trailing = unnamed.includes(columns.length) ? ' (a comma at the end of the header line?)' : ''
    throw new Error(`the header has no name for column ${unnamed.join(', ')} of ${columns.length}${trailing}`)
  }
  const known = new Set([...RECORD_FIELDS, ...type.properties.map((p) => p.key)])
  const unknown = columns.filter((c) => !known.has(c))
  if (unknown.length > 0) {
    // One column whose name holds a semicolon or a tab: most likely a file with another separator.
    const separator = columns.length === 1 && /[;\t]/.test(columns[0]!) ? '; columns are separated by commas' : ''
    throw new Error(`unknown column(s) ${unknown.join(', ')}: asset type ${type.key} has properties ${type.properties.map((p) => p.key).join(', ')}${separator}`)
  }
  const twice = [...new Set(columns.filter((c, i) => columns.indexOf(c) !== i))]
  if (twice.length > 0) throw new Error(`column(s) ${twice.join(', ')} given more than once in the header`)
  if (!columns.includes('name')) throw new Error('the file has no name column')
  const key = type.unique_property_key
  if (upsert && key !== null && !columns.includes(key)) throw new Error(`the file has no ${key} column: --upsert names each asset by ${key}, the unique key of ${type.key}`)
}

export interface ItemFields {
  name: unknown
  access_domain_key?: unknown
  properties: Record<string, unknown>
}

/**
 * A CSV record (column → cell) as the fields of a bulk item, and the cells that do not fit their
 * property's type (left out of the item, so that the rest of the row can still be checked).
 */
export function csvItem(type: AssetTypeInfo, record: Record<string, string>): { item: ItemFields; issues: CellError[] } {
  const properties: Record<string, unknown> = {}
  const issues: CellError[] = []
  for (const property of type.properties) {
    const cell = record[property.key]
    if (cell === undefined) continue
    try {
      const value = convertCell(property, cell)
      if (value !== undefined) properties[property.key] = value
    } catch (err) {
      if (err instanceof CellError) issues.push(err)
      else throw err
    }
  }
  // An asset_type_key column (files made by other tools) must name --type, as in NDJSON.
  const typeKey = record.asset_type_key ?? ''
  if (typeKey !== '' && typeKey !== type.key) issues.push(new CellError('asset_type_key', `asset_type_key is ${JSON.stringify(typeKey)}, not ${type.key} (--type)`))
  const item: ItemFields = { name: record.name ?? '', properties }
  if (record.access_domain_key !== undefined && record.access_domain_key !== '') item.access_domain_key = record.access_domain_key
  return { item, issues }
}

/**
 * An NDJSON record (as `kbis export` writes it) as the fields of a bulk item. A member it does not
 * have is refused, as POST /assets refuses it (`nmae` would otherwise import an asset without its
 * name's typo being seen).
 */
export function ndjsonItem(type: AssetTypeInfo, record: unknown): ItemFields {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) throw new AggregateError([new CellError('', 'the line is not a JSON object')])
  const r = record as Record<string, unknown>
  const unknown = Object.keys(r).filter((k) => k !== 'properties' && !RECORD_FIELDS.includes(k))
  if (unknown.length > 0) {
    throw new AggregateError(unknown.map((k) => new CellError(k, `unknown field ${JSON.stringify(k)}: a line has name, access_domain_key, properties (and asset_type_key, id, created_at, updated_at as kbis export writes them)`)))
  }
  // null is no type, as an empty cell of the CSV column is.
  if (r.asset_type_key !== undefined && r.asset_type_key !== null && r.asset_type_key !== type.key) {
    throw new AggregateError([new CellError('asset_type_key', `asset_type_key is ${JSON.stringify(r.asset_type_key)}, not ${type.key} (--type)`)])
  }
  const item: ItemFields = { name: r.name, properties: (r.properties ?? {}) as Record<string, unknown> }
  if (r.access_domain_key !== undefined) item.access_domain_key = r.access_domain_key
  return item
}

/** The composite key naming an item for `--upsert`: `<type>:<unique property>:<value>`. */
export function compositeKey(type: AssetTypeInfo, properties: Record<string, unknown>): string {
  const key = type.unique_property_key!
  const value = properties[key]
  if (typeof value !== 'string' || value === '') throw new AggregateError([new CellError(key, `${key} is required with --upsert: it names the asset`)])
  return `${type.key}:${key}:${value}`
}
