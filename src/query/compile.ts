import { assertNever } from '../core/errors.js'
import { KEY_PATTERN, type ValueKind } from '../metamodel/types.js'
import { escapeLike, ident, literal, type Params } from '../store/sql.js'
import type { Operator } from './ast.js'
import type { ColumnField, FieldType, PropertyField, RelatedEnd, SystemColumn } from './fields.js'
import type { RelatedCondition, ResolvedCondition, ResolvedGroup, ResolvedNode, ResolvedValue, SqlFragment } from './resolve.js'

/**
 * Stage 3 of parse → resolve → compile, the only one that knows SQL. Values enter the text only
 * as `$n` from `params.add`, numbered in traversal order; identifiers only from the fixed column
 * map; property keys only through `literal()` inside {@link propertyExpr} / {@link propertyContains}.
 */

/**
 * Compiles a resolved filter to a boolean SQL expression over the row alias `alias`
 * (`a` for assets, `r` for relationships).
 *
 * @example
 *   // {or: [{field: 'properties.environment', operator: 'equals', value: 'prod'},
 *   //       {field: 'name', operator: 'starts_with', value: 'db-'}]}
 *   compileFilter(resolved, params, 'a')
 *   // → (a.properties @> $1::jsonb OR a."name" COLLATE "default" ILIKE $2 ESCAPE '\')
 *   //   params.values: ['{"environment":"prod"}', 'db-%']
 * `storage` says where property values live: the jsonb document of `assets` (the default, whose
 * SQL this file's examples show) or a typed projection (src/projection/storage.ts). System
 * columns compile the same either way.
 * @throws Error on anything it cannot compile: a clause is never dropped
 */
export function compileFilter(node: ResolvedNode, params: Params, alias: string, storage: PropertyStorage = JSONB_STORAGE): string {
  checkAlias(alias)
  switch (node.kind) {
    case 'and': case 'or':
      return compileGroup(node, params, alias, storage)
    case 'condition':
      return compileCondition(node, params, alias, storage)
    case 'related':
      return compileRelated(node, params, alias, storage)
    case 'sql':
      return compileFragment(node, params)
    default:
      return assertNever(node)
  }
}

function compileGroup(node: ResolvedGroup, params: Params, alias: string, storage: PropertyStorage): string {
  // Empty groups follow logic (and kysely): an empty AND matches all, an empty OR matches none.
  if (node.children.length === 0) return node.kind === 'and' ? 'TRUE' : 'FALSE'
  const join = node.kind === 'and' ? ' AND ' : ' OR '
  const parts = byRelatedEnd(node.children).map((child) =>
    Array.isArray(child) ? compileRelatedAll(child, join, params, alias, storage) : compileFilter(child, params, alias, storage))
  return parts.length === 1 ? (parts[0] as string) : `(${parts.join(join)})`
}

/**
 * A group's children, those on one related end gathered where the first of them stands: each end
 * is one asset (a primary key), so `EXISTS (… c1) AND EXISTS (… c2)` is `EXISTS (… c1 AND c2)`,
 * and so with OR, one probe of the asset instead of one per condition.
 */
function byRelatedEnd(children: readonly ResolvedNode[]): (ResolvedNode | RelatedCondition[])[] {
  const out: (ResolvedNode | RelatedCondition[])[] = []
  const ends = new Map<RelatedEnd, RelatedCondition[]>()
  for (const child of children) {
    if (child.kind !== 'related') {
      out.push(child)
      continue
    }
    const same = ends.get(child.end)
    if (same) same.push(child)
    else {
      const first = [child]
      ends.set(child.end, first)
      out.push(first)
    }
  }
  return out
}

const RELATED_ALIAS: Readonly<Record<RelatedEnd, string>> = { source: 'sa', target: 'ta' }

function compileRelated(node: RelatedCondition, params: Params, alias: string, storage: PropertyStorage): string {
  return compileRelatedAll([node], ' AND ', params, alias, storage)
}

/**
 * `source_asset.*` / `target_asset.*` conditions on one end, joined by `join` → a correlated
 * EXISTS on the asset's primary key, never a join: a join could duplicate or drop relationship
 * rows, EXISTS only filters them.
 */
function compileRelatedAll(nodes: readonly RelatedCondition[], join: string, params: Params, alias: string, storage: PropertyStorage): string {
  const end = nodes[0]!.end
  const inner = RELATED_ALIAS[end]
  if (inner === alias) throw new Error(`alias ${alias} is reserved for ${end} assets`)
  const column = end === 'source' ? 'source_asset_id' : 'target_asset_id'
  const conditions = nodes.map((node) => compileCondition(node.condition, params, inner, storage))
  const condition = conditions.length === 1 ? conditions[0]! : `(${conditions.join(join)})`
  return `EXISTS (SELECT 1 FROM ${storage.assetRow(inner, alias, column)} AND ${condition})`
}

/** Binds the fragment's own `$1`…`$k` through `params`, in order, and renumbers them. */
function compileFragment(node: SqlFragment, params: Params): string {
  const placeholders = node.values.map((value) => params.add(value))
  const text = node.text.replace(/\$(\d+)/g, (_, n: string) => {
    const placeholder = placeholders[Number(n) - 1]
    if (placeholder === undefined) throw new Error(`SQL fragment refers to $${n} but has ${placeholders.length} values`)
    return placeholder
  })
  return `(${text})`
}

function compileCondition(node: ResolvedCondition, params: Params, alias: string, storage: PropertyStorage): string {
  const { field, operator, value } = node
  if (field.kind === 'column') {
    const x = columnExpr(alias, field.column)
    if (value.kind === 'asset_ref') return compileAssetRef(x, operator, value, params, alias)
    if (value.kind === 'asset_refs') return compileAssetRefList(x, operator, value, params, alias)
    return OPERATOR_SQL[operator](columnOperand(x, field), value, params)
  }
  return OPERATOR_SQL[operator](storage.operand(field, alias), value, params)
}

/**
 * What a storage says about one field of a row: the expressions the operators are built from.
 * It supplies expressions only; what each operator means is {@link OPERATOR_SQL}, the one table
 * shared by system columns, the jsonb document and the typed projection.
 */
export interface Operand {
  /** The field's type, and how errors name it (`column name`, `property tags`). */
  readonly type: FieldType
  readonly name: string
  /** The value, typed (number, date, text…), NULL when missing. */
  readonly expr: string
  /** Whether `expr` can be NULL: negative operators then also match it (CONTRACT §4). */
  readonly nullable: boolean
  /** Element type of the one array parameter of `in` / `not_in` (`text[]`, `numeric[]`…). */
  readonly arrayCast: string | undefined
  /**
   * An equality that is never NULL (jsonb containment `properties @> {"k": v}`, served by the GIN
   * index): equals, not_equals, includes and not_includes are written with it when present.
   */
  readonly containment?: (value: unknown, params: Params) => string
  /** Missing, null, "" and [] (CONTRACT §4), and its opposite. */
  readonly isEmpty: string
  readonly isNotEmpty: string
}

/**
 * Every negative operator also matches empty values (CONTRACT §4: missing, null, "" and []), so
 * `not_equals ""` matches every asset. NOT over NULL is NULL, hence the guard's IS NULL.
 */
function orEmpty(o: Operand, negated: string): string {
  if (!o.nullable) return negated
  return o.type === 'text' ? `(${o.expr} IS NULL OR ${o.expr} = '' OR ${negated})` : `(${o.expr} IS NULL OR ${negated})`
}

/**
 * `""` is an empty value (CONTRACT §4), not a value to match: `equals ""` matches no asset and
 * `in` matches none by its `""`, as `is_empty` is the operator for empties. (A stored `""` used to
 * match both `equals ""` and, being empty, `not_equals ""`.)
 */
const NO_ROW = 'FALSE'

function anyOf(o: Operand, value: ResolvedValue, params: Params): string {
  if (o.arrayCast === undefined || value.kind !== 'list') throw new Error(`cannot compile in/not_in on a ${o.type} field`)
  const values = value.values.filter((v) => v !== '')
  return values.length === 0 ? NO_ROW : `${o.expr} = ANY(${params.add(values)}::${o.arrayCast})`
}

/** Membership in a multi-select: containment of a one-element array. */
function includes(o: Operand, value: ResolvedValue, params: Params): string {
  if (o.type !== 'multi') throw new Error(`includes cannot be compiled on ${o.name}`)
  return o.containment ? o.containment([scalar(value)], params) : `${o.expr} @> ${params.add([scalar(value)])}::text[]`
}

type OperatorSql = (o: Operand, value: ResolvedValue, params: Params) => string

/**
 * THE semantics of each operator (CONTRACT §4), over any storage's {@link Operand}. `in`/`not_in`
 * bind ONE array parameter (PostgREST's choice): the statement text does not grow with the list.
 * Text matches are case-insensitive ({@link ILIKE}) with the user's %, _ and \ matched literally.
 */
export const OPERATOR_SQL: Readonly<Record<Operator, OperatorSql>> = {
  equals: (o, v, p) => (scalar(v) === '' ? NO_ROW : o.containment ? o.containment(scalar(v), p) : `${o.expr} = ${p.add(scalar(v))}`),
  // NOT (containment) is true for a missing key, null and [] as well, and for "" unless the value is "".
  not_equals: (o, v, p) => (o.containment
    ? (scalar(v) === '' ? orEmpty(o, `NOT (${o.containment(scalar(v), p)})`) : `NOT (${o.containment(scalar(v), p)})`)
    : orEmpty(o, `${o.expr} <> ${p.add(scalar(v))}`)),
  greater_than: (o, v, p) => `${o.expr} > ${p.add(scalar(v))}`,
  greater_than_or_equals: (o, v, p) => `${o.expr} >= ${p.add(scalar(v))}`,
  less_than: (o, v, p) => `${o.expr} < ${p.add(scalar(v))}`,
  less_than_or_equals: (o, v, p) => `${o.expr} <= ${p.add(scalar(v))}`,
  contains: (o, v, p) => ILIKE(o.expr, p.add(containsPattern(v))),
  not_contains: (o, v, p) => orEmpty(o, `NOT (${ILIKE(o.expr, p.add(containsPattern(v)))})`),
  starts_with: (o, v, p) => ILIKE(o.expr, p.add(prefixPattern(v))),
  in: (o, v, p) => anyOf(o, v, p),
  not_in: (o, v, p) => orEmpty(o, `NOT (${anyOf(o, v, p)})`),
  includes: (o, v, p) => includes(o, v, p),
  not_includes: (o, v, p) => (o.containment ? `NOT (${includes(o, v, p)})` : orEmpty(o, `NOT (${includes(o, v, p)})`)),
  is_empty: (o) => o.isEmpty,
  is_not_empty: (o) => o.isNotEmpty,
}

/**
 * Where property values are read from. System columns, groups, values, composite keys and the
 * operators ({@link OPERATOR_SQL}) compile the same over any storage.
 */
export interface PropertyStorage {
  /** The expressions of a property of row `alias`. */
  operand(field: PropertyField, alias: string): Operand
  /** The sort key of property `key`, whose definitions have these value kinds (one or more). */
  sortKey(alias: string, key: string, kinds: readonly ValueKind[]): string
  /** FROM item and join of the asset at `outer.column` (a relationship's end), up to its WHERE. */
  assetRow(inner: string, outer: string, column: string): string
  /** True when the storage holds live assets only (the projection); else `archived_at IS NULL` is added. */
  readonly liveOnly: boolean
  /**
   * True when the storage's table holds one organization's rows only (the projection): asset
   * rows then need no `org_id` condition, which a scan would otherwise test on every row.
   */
  readonly oneOrganization: boolean
}

/** Element type of the one array parameter of `in`/`not_in` over columns and jsonb. */
const ARRAY_CAST: Readonly<Partial<Record<FieldType, string>>> = {
  text: 'text[]', date: 'text[]', number: 'numeric[]', uuid: 'uuid[]',
}

/** A system column: only access_domain_key can be NULL; on NOT NULL columns the guard would be dead text. */
function columnOperand(x: string, field: ColumnField): Operand {
  return {
    type: field.type, name: `column ${field.column}`, expr: x, nullable: field.nullable, arrayCast: ARRAY_CAST[field.type],
    isEmpty: `(${x} IS NULL OR ${x} = '')`, isNotEmpty: `(${x} IS NOT NULL AND ${x} <> '')`,
  }
}

/**
 * A property of the jsonb document: equality and membership are containment so that the GIN
 * index assets_live_properties (jsonb_path_ops) serves them (numbers by value: 16 matches 16.0;
 * text exactly); numbers compare through the guarded cast of propertyExpr, dates as 'YYYY-MM-DD'
 * text, whose lexicographic order is chronological.
 */
function jsonbOperand(field: PropertyField, alias: string): Operand {
  const { key, type } = field
  const empty = isEmptyProperty(alias, key)
  return {
    type, name: `property ${key}`, expr: propertyExpr(alias, key, type), nullable: true, arrayCast: ARRAY_CAST[type],
    containment: (value, params) => propertyContains(alias, key, value, params),
    isEmpty: empty, isNotEmpty: `NOT (${empty})`,
  }
}

/**
 * THE sort key of a property, from its value of each kind on a storage (`valueOf`: the jsonb
 * document's, or the projection's typed column), so that GET lists and search order alike. A key
 * of one kind sorts by its value: numbers numerically, dates chronologically, text in byte order
 * (COLLATE "C"), booleans false first, multi-selects element by element. Empty values (a missing
 * key, `""`, `[]`: CONTRACT §4) are NULL, last ascending and first descending. A key with several
 * kinds (across asset types) sorts by its text form.
 */
export function propertySortKey(kinds: readonly ValueKind[], valueOf: (kind: ValueKind) => string): string {
  const distinct = [...new Set(kinds)]
  const nonEmpty = (kind: ValueKind, value: string): string =>
    kind === 'text' ? `NULLIF(${value}, '')` : kind === 'multi' ? `NULLIF(${value}, '{}')` : value
  if (distinct.length === 1) return nonEmpty(distinct[0]!, valueOf(distinct[0]!))
  const texts = distinct.map((kind) => {
    const value = valueOf(kind)
    return kind === 'text' ? nonEmpty(kind, value) : kind === 'multi' ? `NULLIF(array_to_string(${value}, ','), '')` : `${value}::text`
  })
  return `COALESCE(${texts.join(', ')}) COLLATE "C"`
}

/** A property's value of one kind read from the jsonb document, for sorting (propertySortKey). */
function jsonbSortValue(alias: string, key: string, kind: ValueKind): string {
  if (kind === 'number') return propertyExpr(alias, key, 'number')
  if (kind !== 'multi') return `${propertyExpr(alias, key, 'text')} COLLATE "C"`
  const json = propertyExpr(alias, key, 'json')
  return `ARRAY(SELECT e COLLATE "C" FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(${json}) = 'array' THEN ${json} END) e)`
}

/** Properties read from the jsonb document `assets.properties` (GET lists, and the default). */
export const JSONB_STORAGE: PropertyStorage = Object.freeze({
  operand: jsonbOperand,
  sortKey: (alias: string, key: string, kinds: readonly ValueKind[]) => propertySortKey(kinds, (kind) => jsonbSortValue(alias, key, kind)),
  assetRow: (inner: string, outer: string, column: string) =>
    `assets ${inner} WHERE ${inner}.org_id = ${outer}.org_id AND ${inner}.id = ${outer}.${column}`,
  liveOnly: false,
  oneOrganization: false,
})

/**
 * Case-insensitive match (contains, not_contains, starts_with). Columns are COLLATE "C" (byte
 * order, for sorts and indexes), under which ILIKE folds only ASCII letters; the database's
 * default collation folds every script (É/é, Σ/σ), so the match runs under it.
 */
export const ILIKE = (expr: string, placeholder: string): string => `${expr} COLLATE "default" ILIKE ${placeholder} ESCAPE '\\'`

/** The SQL expression of a system column: the name comes from the fixed column map. */
export function columnExpr(alias: string, column: SystemColumn): string {
  return `${alias}.${ident(column)}`
}

/**
 * A composite key `type:unique_key:value` is looked up in the same statement, through the index
 * `assets_unique_prop` (live assets only, where the value is unique).
 */
function compileAssetRef(x: string, operator: Operator, ref: ResolvedValue & { kind: 'asset_ref' }, params: Params, alias: string): string {
  const lookup = `${x} IN (SELECT ca.id FROM assets ca WHERE ca.org_id = ${alias}.org_id`
    + ` AND ca.asset_type_key = ${params.add(ref.asset_type_key)} AND ca.unique_value = ${params.add(ref.unique_value)}`
    + ' AND ca.archived_at IS NULL)'
  if (operator === 'equals') return lookup
  if (operator === 'not_equals') return `NOT (${lookup})`
  throw new Error(`${operator} cannot take a composite key`)
}

/**
 * `in`/`not_in` over UUIDs and composite keys: the UUIDs as one array, the keys as one lookup
 * through `assets_unique_prop` with both halves of every key as two array parameters.
 */
function compileAssetRefList(x: string, operator: Operator, refs: ResolvedValue & { kind: 'asset_refs' }, params: Params, alias: string): string {
  const parts: string[] = []
  if (refs.ids.length > 0) parts.push(`${x} = ANY(${params.add(refs.ids)}::uuid[])`)
  const types = params.add(refs.keys.map((k) => k.asset_type_key))
  const values = params.add(refs.keys.map((k) => k.unique_value))
  parts.push(`${x} IN (SELECT ca.id FROM assets ca WHERE ca.org_id = ${alias}.org_id`
    + ` AND (ca.asset_type_key, ca.unique_value) IN (SELECT * FROM unnest(${types}::text[], ${values}::text[]))`
    + ' AND ca.archived_at IS NULL)')
  const any = parts.length === 1 ? parts[0]! : `(${parts.join(' OR ')})`
  if (operator === 'in') return any
  if (operator === 'not_in') return `NOT ${any.startsWith('(') ? any : `(${any})`}`
  throw new Error(`${operator} cannot take a list of composite keys`)
}

/** Missing, JSON null, "" and [] are empty (CONTRACT §4); COALESCE makes a missing key `null`. */
function isEmptyProperty(alias: string, key: string): string {
  return `COALESCE(${propertyExpr(alias, key, 'json')}, 'null'::jsonb) IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb)`
}

/** contains/not_contains: case-insensitive (ILIKE), with the user's %, _ and \ matched literally. */
export function containsPattern(value: ResolvedValue): string {
  return `%${escapeLike(text(value))}%`
}

export function prefixPattern(value: ResolvedValue): string {
  return `${escapeLike(text(value))}%`
}

export function scalar(value: ResolvedValue): string | number | boolean {
  if (value.kind !== 'scalar') throw new Error(`expected one value, got ${value.kind}`)
  return value.value
}

function text(value: ResolvedValue): string {
  const v = scalar(value)
  if (typeof v !== 'string') throw new Error('expected a string value')
  return v
}

/** How a property is read: its value kind, or `json` for the raw jsonb value. */
export type PropertyForm = ValueKind | 'json'

/**
 * How the jsonb storage ({@link JSONB_STORAGE}) reads a property of `assets.properties`: every
 * jsonb property expression of filters and sorts comes from here and {@link propertyContains}.
 * Search and analytics read the typed projection instead (src/projection/storage.ts). The key goes through
 * `literal()`, not a parameter, so expression indexes on `properties->>'key'` still match.
 *
 * - `number`: a guarded cast, NULL unless the stored value is a JSON number, so a bad stored value
 *   never raises a cast error in the middle of a query.
 * - `json`: the jsonb value (NULL when the key is missing).
 * - others: the text form (`->>`): strings as such, dates as 'YYYY-MM-DD', booleans 'true'/'false'.
 */
export function propertyExpr(alias: string, key: string, form: PropertyForm): string {
  checkAlias(alias)
  if (!KEY_PATTERN.test(key)) throw new Error(`not a property key: ${JSON.stringify(key)}`)
  const json = `${alias}.properties->${literal(key)}`
  switch (form) {
    case 'json': return json
    case 'number': return `(CASE WHEN jsonb_typeof(${json}) = 'number' THEN (${alias}.properties->>${literal(key)})::numeric END)`
    case 'text': case 'date': case 'boolean': case 'multi': return `(${alias}.properties->>${literal(key)})`
    default: return assertNever(form)
  }
}

/** The jsonb containment form `properties @> {"key": value}` (one JSON parameter). */
export function propertyContains(alias: string, key: string, value: unknown, params: Params): string {
  checkAlias(alias)
  if (!KEY_PATTERN.test(key)) throw new Error(`not a property key: ${JSON.stringify(key)}`)
  return `${alias}.properties @> ${params.add(JSON.stringify({ [key]: value }))}::jsonb`
}

const ALIAS = /^[a-z_][a-z0-9_]*$/

/** Aliases come from code, never from a request; this only guards against mistakes. */
export function checkAlias(alias: string): void {
  if (!ALIAS.test(alias)) throw new Error(`not a table alias: ${JSON.stringify(alias)}`)
}
