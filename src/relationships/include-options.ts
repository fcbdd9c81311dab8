import { AppError, Errors, type ErrorDef, type Issue } from '../core/errors.js'
import { DEFAULT_PAGE_SIZE, pageFromQuery, type Page } from '../core/pagination.js'
import { escapePointer, isObject } from '../core/json.js'
import { parseSortParam } from '../query/sort.js'
import { MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH } from '../query/limits.js'
import type { Direction } from './embedded-sql.js'
import type { IncludeFilter, IncludeSort, IncludeSortField } from './include-sql.js'

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
const FILTER_FIELDS: readonly (keyof IncludeFilter)[] = ['relationship_type_key', 'direction', 'related_asset.asset_type_key']
const DIRECTIONS: readonly Direction[] = ['outgoing', 'incoming']

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
  if (field === 'direction' && values.some((v) => !DIRECTIONS.includes(v as Direction))) fail(Errors.INVALID_FILTER, at, 'direction must be outgoing or incoming')
  return values as string[]
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
  const filter: Record<string, string[]> = {}
  for (const [key, value] of Object.entries(query)) {
    const field = QUERY_FILTER.exec(key)?.[1]
    if (field !== undefined) filter[field] = filterValue(field, value, { parameter: key })
  }
  const specs = typeof query.relationships_sort === 'string' ? parseSortParam(query.relationships_sort, 'relationships_sort') : []
  const sort = specs.map((s): IncludeSort => ({ field: sortField(s.field, { parameter: 'relationships_sort' }), order: s.order }))
  const page = pageFromQuery(query, 'relationships_page')
  return expand === null ? null : { expand, page, filter: filter as IncludeFilter, sort }
}

/** The search-body form (CONTRACT §4): `include` array and the `relationships` block. */
export interface IncludeBody {
  include?: unknown
  relationships?: unknown
}

/**
 * Reads `{"include": [...], "relationships": {"page": {number, size}, "filter": {...}, "sort": [{field, order}]}}`
 * of a search body, whose shape the route's schema has checked (search/schemas.ts). `filter` is
 * either a flat object (`{"relationship_type_key": "runs_on", "direction": ["outgoing"]}`) or
 * search conditions on those fields with `equals`/`in`, possibly in `and` groups: read here, as
 * its fields and their values are this folder's. Errors point into the body.
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
  if (value === undefined || value === null) return {}
  if (!isObject(value)) fail(Errors.INVALID_FILTER, { pointer }, 'filter must be an object')
  const out: Record<string, string[]> = {}
  // Several conditions on one field in an `and` must all hold: keep the values common to them.
  const add = (field: string, values: string[]): void => {
    out[field] = out[field] === undefined ? values : out[field].filter((v) => values.includes(v))
  }
  collectConditions(value, pointer, add, 0, { conditions: 0 })
  return out as IncludeFilter
}

/** The limits of the search filter (CONTRACT §4: 10 group levels, 500 conditions) hold here too. */
function collectConditions(node: Record<string, unknown>, pointer: string, add: (field: string, values: string[]) => void, depth: number, seen: { conditions: number }): void {
  if (Array.isArray(node.and)) {
    if (depth + 1 > MAX_FILTER_DEPTH) fail(Errors.INVALID_FILTER, { pointer }, `filter groups nest at most ${MAX_FILTER_DEPTH} levels deep`)
    node.and.forEach((child: unknown, i) => {
      if (!isObject(child)) fail(Errors.INVALID_FILTER, { pointer: `${pointer}/and/${i}` }, 'a filter node must be an object')
      collectConditions(child, `${pointer}/and/${i}`, add, depth + 1, seen)
    })
  } else if ('field' in node || 'operator' in node) {
    if (++seen.conditions > MAX_FILTER_CONDITIONS) fail(Errors.INVALID_FILTER, { pointer }, `a filter has at most ${MAX_FILTER_CONDITIONS} conditions`)
    const { field, operator } = node
    if (typeof field !== 'string') fail(Errors.INVALID_FILTER, { pointer: `${pointer}/field` }, 'field must be a string')
    if (operator !== 'equals' && operator !== 'in') {
      fail(Errors.INVALID_FILTER, { pointer: `${pointer}/operator` }, 'included relationships are filtered with equals or in, combined by and')
    }
    add(field, filterValue(field, node.value, { pointer: `${pointer}/value` }, { pointer: `${pointer}/field` }))
  } else if ('or' in node) {
    fail(Errors.INVALID_FILTER, { pointer: `${pointer}/or` }, 'included relationships are filtered with equals or in, combined by and (no or)')
  } else {
    for (const [field, v] of Object.entries(node)) add(field, filterValue(field, v, { pointer: `${pointer}/${escapePointer(field)}` }))
  }
}
