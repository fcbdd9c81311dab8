import type { ValueKind } from '../metamodel/types.js'
import { checkAlias, propertySortKey, type Operand, type PropertyStorage } from '../query/compile.js'
import type { PropertyField } from '../query/fields.js'
import { ident } from '../store/sql.js'
import { columnRef, type Projection } from './columns.js'

/**
 * Properties read from typed columns of the organization's projection table (search and
 * analytics). The semantics are those of CONTRACT §4, as over jsonb: text operators are
 * case-insensitive, and every negative operator also matches empty values. Only the SQL differs,
 * e.g. for `properties.cpu_count greater_than_or_equals 16` and `properties.tags includes "pci"`:
 *
 *   jsonb:      (CASE WHEN jsonb_typeof(a.properties->'cpu_count') = 'number' THEN (a.properties->>'cpu_count')::numeric END) >= $1
 *               a.properties @> $2::jsonb                       -- '{"tags":["pci"]}'
 *   projection: a."n_cpu_count" >= $1
 *               a."m_tags" @> $2::text[]                        -- ['pci']
 *
 * Values are bound as they are; PostgreSQL types each `$n` from the column it is compared with
 * (numeric, date, boolean, text), so a date is compared as a date.
 */
export function projectionStorage(projection: Projection): PropertyStorage {
  return Object.freeze({
    operand: (field: PropertyField, alias: string) => typedOperand(columnRef(projection, checked(alias), field.type, field.key), field),
    sortKey: (alias: string, key: string, kinds: readonly ValueKind[]) => sortKey(projection, checked(alias), key, kinds),
    assetRow: (inner: string, outer: string, column: string) =>
      `${ident(projection.table)} ${checked(inner)} WHERE ${inner}.org_id = ${checked(outer)}.org_id AND ${inner}.id = ${outer}.${column}`,
    // The projection holds live assets only (its trigger deletes a row when its asset is archived),
    // of one organization: every statement that writes it is filtered by that organization (ddl.ts).
    liveOnly: true,
    oneOrganization: true,
  })
}

function checked(alias: string): string {
  checkAlias(alias)
  return alias
}

/** Element type of the one array parameter of `in` / `not_in`, by column kind. */
const ARRAY_CAST: Readonly<Partial<Record<ValueKind, string>>> = { text: 'text[]', number: 'numeric[]', date: 'date[]' }

/**
 * Column `c` of kind `kind`: missing and null are NULL in every column; "" and [] are empty too
 * (CONTRACT §4). Membership (includes) is array containment with one text[] parameter.
 */
function typedOperand(c: string, { key, type: kind }: PropertyField): Operand {
  return { type: kind, name: `property ${key}`, expr: c, nullable: true, arrayCast: ARRAY_CAST[kind], isEmpty: isEmpty(c, kind), isNotEmpty: isNotEmpty(c, kind) }
}

function isEmpty(c: string, kind: ValueKind): string {
  if (kind === 'text') return `(${c} IS NULL OR ${c} = '')`
  if (kind === 'multi') return `(${c} IS NULL OR cardinality(${c}) = 0)`
  return `${c} IS NULL`
}

function isNotEmpty(c: string, kind: ValueKind): string {
  if (kind === 'text') return `(${c} IS NOT NULL AND ${c} <> '')`
  if (kind === 'multi') return `cardinality(${c}) > 0`
  return `${c} IS NOT NULL`
}

/** A key sorts by its typed columns, as over jsonb (query/compile.ts propertySortKey). */
function sortKey(projection: Projection, alias: string, key: string, kinds: readonly ValueKind[]): string {
  return propertySortKey(kinds, (kind) => columnRef(projection, alias, kind, key))
}
