import { AppError, Errors, type ErrorDef, type Issue } from '../core/errors.js'
import { DEFAULT_PAGE_SIZE, pageFromQuery, type Page } from '../core/pagination.js'
import { escapePointer, isObject } from '../core/json.js'
import { parseSortParam } from '../query/sort.js'
import { parseFilter } from '../query/parse.js'
import type { FilterNode } from '../query/ast.js'
import type { Direction } from './embedded-sql.js'
import type { IncludeFilter, IncludeFilterField, IncludeFilterNode, IncludeOperator, IncludeSort, IncludeSortField } from './include-sql.js'

/** How much of each related asset an asset include carries. */
export type RelatedExpansion = 'ids' | 'asset' | 'properties'

/** Everything that shapes the included relationships of a page of assets, parsed and checked. */
export interface RelationshipIncludeOptions {
  expand: RelatedExpansion
  page: Page
  filter: IncludeFilter
  sort: IncludeSort[]
}

type At = Pick<Issue, 'pointer' | 'parameter'>

function fail(def: ErrorDef, at: At, detail: string): never {
  throw new AppError(def, [{ detail, ...at }])
}

// CONTRACT §3: `relationships`, `relationships,relationships.related_asset`,
// `relationships,relationships.related_asset.properties`. A deeper value implies the shallower
// ones (as in JSON:API), so `relationships.related_asset` alone is read as the pair.
// A Map: an object literal would also answer `constructor`, `__proto__`, `toString`, … .
const ASSET_INCLUDES: ReadonlyMap<string, RelatedExpansion> = new Map([
  ['relationships', 'ids'],
  ['relationships.related_asset', 'asset'],
  ['relationships.related_asset.properties', 'properties'],
])
const RANK: Readonly<Record<RelatedExpansion, number>> = { ids: 0, asset: 1, properties: 2 }

/**
 * The expansion asked for by asset include values, or null when none is. Any other value is a
 * 400 invalid_include located by `at(index)`.
 */
export function parseAssetIncludes(values: readonly string[], at: (index: number) => At): RelatedExpansion | null {
  let expand: RelatedExpansion | null = null
  values.forEach((value, i) => {
    const level = ASSET_INCLUDES.get(value)
    if (level === undefined) {
      fail(Errors.INVALID_INCLUDE, at(i), `unknown include ${JSON.stringify(value)}; assets include relationships, relationships.related_asset, relationships.related_asset.properties`)
    }
    if (expand === null || RANK[level] > RANK[expand]) expand = level
  })
  return expand
}

/** `include=a,b` → ['a', 'b']; blanks are ignored, so `include=` asks for nothing. */
export function splitInclude(value: unknown): string[] {
  return typeof value === 'string' ? value.split(',').map((v) => v.trim()).filter((v) => v !== '') : []
}

const SORT_FIELDS: readonly IncludeSortField[] = ['created_at', 'relationship_type_key', 'related_asset.name']
const FILTER_FIELDS: readonly IncludeFilterField[] = ['relationship_type_key', 'direction', 'related_asset.asset_type_key', 'related_asset.name']
const DIRECTIONS: readonly Direction[] = ['outgoing', 'incoming']
/** The operators of each field: equality on every one, text matches (case-insensitive) on a name too. */
const EQUALITY: readonly IncludeOperator[] = ['equals', 'not_equals', 'in', 'not_in']
const OPERATORS_OF: Readonly<Record<IncludeFilterField, readonly IncludeOperator[]>> = {
  relationship_type_key: EQUALITY,
  direction: EQUALITY,
  'related_asset.asset_type_key': EQUALITY,
  'related_asset.name': [...EQUALITY, 'contains', 'not_contains', 'starts_with'],
}

function sortField(field: string, at: At): IncludeSortField {
  if (!(SORT_FIELDS as readonly string[]).includes(field)) {
    fail(Errors.INVALID_SORT, at, `cannot sort included relationships by ${JSON.stringify(field)}; they sort by ${SORT_FIELDS.join(', ')}`)
  }
  return field as IncludeSortField
}

/** The values of a filter on `field`; an unknown field is reported at `fieldAt` (default `at`, the value's place). */
function filterValue(field: string, value: unknown, at: At, fieldAt: At = at): string[] {
  if (!(FILTER_FIELDS as readonly string[]).includes(field)) {
    fail(Errors.INVALID_FILTER, fieldAt, `unknown relationships filter field ${JSON.stringify(field)}; it takes ${FILTER_FIELDS.join(', ')}`)
  }
  const values = Array.isArray(value) ? value : [value]
  if (values.length === 0 || values.some((v) => typeof v !== 'string')) fail(Errors.INVALID_FILTER, at, `${field} takes a string or an array of strings`)
  return checkDirections(field, values as string[], at)
}

function checkDirections(field: string, values: string[], at: At): string[] {
  if (field === 'direction' && values.some((v) => !DIRECTIONS.includes(v as Direction))) fail(Errors.INVALID_FILTER, at, 'direction must be outgoing or incoming')
  return values
}

/** Each field any of its values (the query string's form, and the body's short one): an `and` of `in`s; null for none. */
function anyOf(fields: [string, string[]][]): IncludeFilter {
  if (fields.length === 0) return null
  return { kind: 'and', children: fields.map(([field, values]) => ({ kind: 'condition', field: field as IncludeFilterField, operator: 'in', values })) }
}

const QUERY_FILTER = /^relationships_filter\[(.*)\]$/s

/**
 * The query-string form: include, relationships_page[number|size],
 * relationships_filter[relationship_type_key|direction|related_asset.asset_type_key] and
 * relationships_sort=created_at|relationship_type_key|related_asset.name (`-` for descending).
 * Null when no relationships are included; the other parameters are checked all the same (an
 * unknown field or a bad value is a 400 whether or not relationships are included).
 */
export function includeOptionsFromQuery(query: Record<string, unknown>): RelationshipIncludeOptions | null {
  const expand = parseAssetIncludes(splitInclude(query.include), () => ({ parameter: 'include' }))
  const fields: [string, string[]][] = []
  for (const [key, value] of Object.entries(query)) {
    const field = QUERY_FILTER.exec(key)?.[1]
    if (field !== undefined) fields.push([field, filterValue(field, value, { parameter: key })])
  }
  const specs = typeof query.relationships_sort === 'string' ? parseSortParam(query.relationships_sort, 'relationships_sort') : []
  const sort = specs.map((s): IncludeSort => ({ field: sortField(s.field, { parameter: 'relationships_sort' }), order: s.order }))
  const page = pageFromQuery(query, 'relationships_page')
  return expand === null ? null : { expand, page, filter: anyOf(fields), sort }
}

/** The search-body form (CONTRACT §4): `include` array and the `relationships` block. */
export interface IncludeBody {
  include?: unknown
  relationships?: unknown
}

/**
 * Reads `{"include": [...], "relationships": {"page": {number, size}, "filter": {...}, "sort": [{field, order}]}}`
 * of a search body, whose shape the route's schema has checked (search/schemas.ts). `filter` is a
 * search filter (CONTRACT §4: conditions in nested `and`/`or` groups, within the same limits) on
 * the fields of included relationships, or the short form `{"relationship_type_key": "runs_on",
 * "direction": ["outgoing"]}` (each field any of its values). Errors point into the body.
 */
export function includeOptionsFromBody(body: IncludeBody): RelationshipIncludeOptions | null {
  const expand = body.include === undefined || body.include === null ? null : parseAssetIncludes(body.include as string[], (i) => ({ pointer: `/include/${i}` }))
  // Checked whether or not relationships are included, as the query-string form.
  const block = (body.relationships ?? {}) as { page?: Partial<Page> | null; filter?: unknown; sort?: { field: string; order?: 'asc' | 'desc' }[] | null }
  const page = block.page ?? {}
  const filter = bodyFilter(block.filter, '/relationships/filter')
  const sort = (block.sort ?? []).map((s, i): IncludeSort => ({ field: sortField(s.field, { pointer: `/relationships/sort/${i}/field` }), order: s.order ?? 'asc' }))
  return expand === null ? null : { expand, page: { number: page.number ?? 1, size: page.size ?? DEFAULT_PAGE_SIZE }, filter, sort }
}

function bodyFilter(value: unknown, pointer: string): IncludeFilter {
  if (value === undefined || value === null) return null
  if (!isObject(value)) fail(Errors.INVALID_FILTER, { pointer }, 'filter must be an object')
  if (!['and', 'or', 'field', 'operator', 'value'].some((member) => member in value)) {
    return anyOf(Object.entries(value).map(([field, v]) => [field, filterValue(field, v, { pointer: `${pointer}/${escapePointer(field)}` })]))
  }
  const node = parseFilter(value, pointer)
  return node === null ? null : resolveNode(node)
}

/** A parsed condition or group, checked against the fields of included relationships and their operators. */
function resolveNode(node: FilterNode): IncludeFilterNode {
  if (node.kind !== 'condition') return { kind: node.kind, children: node.children.map(resolveNode) }
  const field = node.field as IncludeFilterField
  if (!FILTER_FIELDS.includes(field)) {
    fail(Errors.INVALID_FILTER, { pointer: `${node.pointer}/field` }, `unknown relationships filter field ${JSON.stringify(node.field)}; it takes ${FILTER_FIELDS.join(', ')}`)
  }
  const operator = node.operator as IncludeOperator
  if (!OPERATORS_OF[field].includes(operator)) {
    fail(Errors.INVALID_FILTER, { pointer: `${node.pointer}/operator` }, `${field} of included relationships takes the operators ${OPERATORS_OF[field].join(', ')}, not ${node.operator}`)
  }
  const at = { pointer: `${node.pointer}/value` }
  const list = operator === 'in' || operator === 'not_in'
  const { value } = node
  if (list && (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))) fail(Errors.INVALID_FILTER, at, `${operator} takes an array of strings`)
  if (!list && typeof value !== 'string') fail(Errors.INVALID_FILTER, at, `${operator} takes a string`)
  return { kind: 'condition', field, operator, values: checkDirections(field, list ? (value as string[]) : [value as string], at) }
}
