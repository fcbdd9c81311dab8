import { createHash } from 'node:crypto'
import { assertNever } from '../core/errors.js'
import { isUuid } from '../core/time.js'
import { KEY_PATTERN, type ValueKind } from '../metamodel/types.js'
import { ident, literal } from '../store/sql.js'

/**
 * Names and types of the typed projection (migration 0002): one table per organization, one
 * column per (property key, value kind). Pure: no database access. Names are derived, never
 * stored per request, so every process computes the same ones.
 */

/** One typed column of the projection. */
export interface ProjectedColumn {
  readonly key: string
  readonly kind: ValueKind
  readonly column: string
}

/** The projection of one organization as a query needs it: its table and its property columns. */
export interface Projection {
  readonly table: string
  /** `${kind}:${key}` → column name. */
  readonly columns: ReadonlyMap<string, string>
}

/** The system columns, copied as they are from `assets` (text ones keep COLLATE "C"). */
export const SYSTEM_COLUMNS = ['org_id', 'id', 'asset_type_key', 'name', 'access_domain_key', 'created_at', 'updated_at'] as const

/** `assets_typed_<32 hex>`: 45 characters, well inside PostgreSQL's 63. */
export function projectionTable(orgId: string): string {
  if (!isUuid(orgId)) throw new Error(`not an organization id: ${JSON.stringify(orgId)}`)
  return `assets_typed_${orgId.toLowerCase().replaceAll('-', '')}`
}

const PREFIX: Readonly<Record<ValueKind, string>> = { text: 't', number: 'n', date: 'd', boolean: 'b', multi: 'm' }

/**
 * `n_cpu_count` for the number column of `cpu_count`. The kind is part of the name because one
 * key may be a number on one asset type and text on another. A key near the 63-character limit
 * is shortened and made unique again by a hash of the key.
 */
export function columnName(kind: ValueKind, key: string): string {
  if (!KEY_PATTERN.test(key)) throw new Error(`not a property key: ${JSON.stringify(key)}`)
  const name = `${PREFIX[kind]}_${key}`
  if (name.length <= 63) return name
  return `${PREFIX[kind]}_${key.slice(0, 50)}_${createHash('sha256').update(key).digest('hex').slice(0, 10)}`
}

export function columnKey(kind: ValueKind, key: string): string {
  return `${kind}:${key}`
}

/**
 * Column types. numeric, not double precision: sums of currency values stay exact (0.1 + 0.2 is
 * 0.3), and measured on 200,000 rows the aggregates cost the same. Text and multi-select values
 * sort in byte order, as the text columns of `assets` do.
 */
export const SQL_TYPE: Readonly<Record<ValueKind, string>> = {
  text: 'text COLLATE "C"', number: 'numeric', date: 'date', boolean: 'boolean', multi: 'text[] COLLATE "C"',
}

/**
 * The typed value of property `key` read from the jsonb document of row `alias`, by JSON type: a
 * kind's column holds only values of its JSON type (a string in a number column would be a cast
 * error), so equality on a text column never matches the number 3 for "3", as jsonb containment
 * does not either. Dates go through `kbis_date`, which answers NULL rather than raising.
 */
export function extractExpr(kind: ValueKind, key: string, alias: string): string {
  const json = `${alias}.properties->${literal(key)}`
  const text = `${alias}.properties->>${literal(key)}`
  const typed = (jsonType: string, value: string): string => `CASE WHEN jsonb_typeof(${json}) = '${jsonType}' THEN ${value} END`
  switch (kind) {
    case 'text': return typed('string', text)
    case 'number': return typed('number', `(${text})::numeric`)
    case 'boolean': return typed('boolean', `(${text})::boolean`)
    case 'date': return typed('string', `kbis_date(${text})`)
    case 'multi': return typed('array', `ARRAY(SELECT jsonb_array_elements_text(${json}))`)
    default: return assertNever(kind)
  }
}

/** The projection a query uses, from the registry's column list. */
export function projectionOf(orgId: string, columns: readonly ProjectedColumn[]): Projection {
  return Object.freeze({
    table: projectionTable(orgId),
    columns: new Map(columns.map((c) => [columnKey(c.kind, c.key), c.column])),
  })
}

/** `alias."n_cpu_count"`, or an Error naming the missing column (a bug: ensureProjection adds every one). */
export function columnRef(projection: Projection, alias: string, kind: ValueKind, key: string): string {
  const column = projection.columns.get(columnKey(kind, key))
  if (column === undefined) throw new Error(`the projection has no ${kind} column for ${key}`)
  return `${alias}.${ident(column)}`
}
