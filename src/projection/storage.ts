import { assertNever } from '../core/errors.js'
import type { ValueKind } from '../metamodel/types.js'
import type { Operator } from '../query/ast.js'
import { COMPARISON, ILIKE, checkAlias, containsPattern, prefixPattern, scalar, type PropertyStorage } from '../query/compile.js'
import type { PropertyField } from '../query/fields.js'
import type { ResolvedValue } from '../query/resolve.js'
import { ident, type Params } from '../store/sql.js'
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
    condition: (field: PropertyField, operator: Operator, value: ResolvedValue, params: Params, alias: string) =>
      typedCondition(columnRef(projection, checked(alias), field.type, field.key), field.type, operator, value, params),
    sortKey: (alias: string, key: string, kinds: readonly ValueKind[]) => sortKey(projection, checked(alias), key, kinds),
    assetRow: (inner: string, outer: string, column: string) =>
      `${ident(projection.table)} ${checked(inner)} WHERE ${inner}.org_id = ${checked(outer)}.org_id AND ${inner}.id = ${outer}.${column}`,
  })
}

function checked(alias: string): string {
  checkAlias(alias)
  return alias
}

/** Element type of the one array parameter of `in` / `not_in`, by column kind. */
const ARRAY_CAST: Readonly<Partial<Record<ValueKind, string>>> = { text: 'text[]', number: 'numeric[]', date: 'date[]' }

/** One operator on column `c` of kind `kind`. */
function typedCondition(c: string, kind: ValueKind, operator: Operator, value: ResolvedValue, params: Params): string {
  // Negative operators also match empty values (CONTRACT §4); NOT over NULL is NULL, hence the guard.
  const orEmpty = (negated: string): string => `(${c} IS NULL OR ${negated})`
  switch (operator) {
    case 'equals': return `${c} = ${params.add(scalar(value))}`
    case 'not_equals': return orEmpty(`${c} <> ${params.add(scalar(value))}`)
    case 'greater_than': case 'greater_than_or_equals': case 'less_than': case 'less_than_or_equals':
      return `${c} ${COMPARISON[operator]} ${params.add(scalar(value))}`
    case 'contains': return ILIKE(c, params.add(containsPattern(value)))
    case 'not_contains': return orEmpty(`NOT (${ILIKE(c, params.add(containsPattern(value)))})`)
    case 'starts_with': return ILIKE(c, params.add(prefixPattern(value)))
    case 'in': return anyOf(c, kind, value, params)
    case 'not_in': return orEmpty(`NOT (${anyOf(c, kind, value, params)})`)
    // Membership: array containment, one text[] parameter.
    case 'includes': return `${c} @> ${params.add([scalar(value)])}::text[]`
    case 'not_includes': return orEmpty(`NOT (${c} @> ${params.add([scalar(value)])}::text[])`)
    case 'is_empty': return isEmpty(c, kind)
    case 'is_not_empty': return isNotEmpty(c, kind)
    default: return assertNever(operator)
  }
}

function anyOf(c: string, kind: ValueKind, value: ResolvedValue, params: Params): string {
  const cast = ARRAY_CAST[kind]
  if (cast === undefined || value.kind !== 'list') throw new Error(`cannot compile in/not_in on a ${kind} column`)
  return `${c} = ANY(${params.add([...value.values])}::${cast})`
}

/** Missing and null are NULL in every column; "" and [] are empty too (CONTRACT §4). */
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

/**
 * A key of one kind sorts by its column: numbers numerically, dates chronologically, text in byte
 * order (the column is COLLATE "C"), booleans false first, multi-selects element by element. A
 * key with several kinds sorts by its text form, as over jsonb.
 */
function sortKey(projection: Projection, alias: string, key: string, kinds: readonly ValueKind[]): string {
  const distinct = [...new Set(kinds)]
  if (distinct.length === 1) return columnRef(projection, alias, distinct[0]!, key)
  const texts = distinct.map((kind) => {
    const c = columnRef(projection, alias, kind, key)
    return kind === 'text' ? c : kind === 'multi' ? `array_to_string(${c}, ',')` : `${c}::text`
  })
  return `COALESCE(${texts.join(', ')}) COLLATE "C"`
}
