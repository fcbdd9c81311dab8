import { AppError, Errors, type Issue } from '../core/errors.js'
import type { Metamodel } from '../metamodel/types.js'
import { JSONB_STORAGE, columnExpr, type PropertyStorage } from './compile.js'
import { PROPERTY_PREFIX, columnField, propertyFields, sortableFieldsText, type Target } from './fields.js'
import { describeValue } from './values.js'

/**
 * Sorting: `sort=name,-created_at` on GET lists, `[{field, order}]` in search bodies. Parsing
 * checks the shape; {@link compileOrderBy} checks fields against the whitelist and writes SQL.
 */

export type SortOrder = 'asc' | 'desc'

export interface SortSpec {
  readonly field: string
  readonly order: SortOrder
  /** JSON pointer of the body entry; absent for the `sort` query parameter. */
  readonly pointer?: string
}

/**
 * `sort=name,-created_at` → `[{field: 'name', order: 'asc'}, {field: 'created_at', order: 'desc'}]`.
 * An empty parameter means the default order. Items are trimmed.
 * @throws AppError invalid_sort with `source.parameter` `sort` (or the `parameter` given)
 */
export function parseSortParam(sort: string, parameter = 'sort'): SortSpec[] {
  if (sort.trim() === '') return []
  return sort.split(',').map((raw, i) => {
    const item = raw.trim()
    const desc = item.startsWith('-')
    const field = desc ? item.slice(1) : item
    if (field === '') fail({ parameter }, `${parameter} item ${i + 1} names no field; use ${parameter}=<field> or ${parameter}=-<field>, comma-separated`)
    return Object.freeze({ field, order: desc ? 'desc' : 'asc' })
  })
}

/**
 * The ORDER BY list (without the keyword) for `specs` over the row alias `alias`. The row's `id`
 * is appended as the final key unless it is already the last one, so equal keys never make pages
 * overlap; no specs give the default `created_at, id`. Empty values follow PostgreSQL's rule
 * (NULL sorts above every value): last ascending, first descending, which a backward index scan
 * serves. Numbers sort numerically through the guarded cast, every other property as text in byte
 * order (`COLLATE "C"`, as the text columns: the same order on every store).
 *
 * `storage` says where property values live (see compileFilter); jsonb by default. `types`: the
 * asset types the request's filter restricts to (query/asset-types.ts `assetTypesOf`); a property
 * key that asset types define with different kinds sorts by the kinds of these types' definitions
 * (an integer on the one type filtered for sorts numerically), by its text form when they differ.
 *
 * @example compileOrderBy(parseSortParam('-properties.cpu_count,name'), 'assets', mm, 'a')
 *   // → (CASE WHEN jsonb_typeof(a.properties->'cpu_count') = 'number' THEN (a.properties->>'cpu_count')::numeric END) DESC, a."name" ASC, a."id" ASC
 * @throws AppError invalid_sort for a field that cannot be sorted on `target`
 */
export function compileOrderBy(
  specs: readonly SortSpec[], target: Target, metamodel: Metamodel, alias: string, storage: PropertyStorage = JSONB_STORAGE,
  types: ReadonlySet<string> | null = null,
): string {
  const keys = (specs.length === 0 ? DEFAULT_SORT : specs).map((spec) => `${sortExpr(spec, target, metamodel, alias, storage, types)} ${spec.order.toUpperCase()}`)
  const last = specs.length === 0 ? DEFAULT_SORT.at(-1) : specs.at(-1)
  if (last?.field !== 'id') keys.push(`${columnExpr(alias, 'id')} ASC`)
  return keys.join(', ')
}

const DEFAULT_SORT: readonly SortSpec[] = [{ field: 'created_at', order: 'asc' }, { field: 'id', order: 'asc' }]

function sortExpr(spec: SortSpec, target: Target, metamodel: Metamodel, alias: string, storage: PropertyStorage, types: ReadonlySet<string> | null): string {
  const column = columnField(target, spec.field)
  if (column !== undefined) return columnExpr(alias, column.column)
  const at: Pick<Issue, 'pointer' | 'parameter'> = spec.pointer === undefined ? { parameter: 'sort' } : { pointer: `${spec.pointer}/field` }
  if (target !== 'assets' || !spec.field.startsWith(PROPERTY_PREFIX)) {
    fail(at, `cannot sort by ${describeValue(spec.field)}; ${target} sort by ${sortableFieldsText(target)}`)
  }
  const key = spec.field.slice(PROPERTY_PREFIX.length)
  const fields = propertyFields(key, metamodel, types)
  if (fields.length === 0) fail(at, `cannot sort by ${describeValue(spec.field)}: no asset type in the metamodel defines property ${describeValue(key)}`)
  return storage.sortKey(alias, key, fields.map((f) => f.type))
}

function fail(at: Pick<Issue, 'pointer' | 'parameter'>, detail: string): never {
  throw new AppError(Errors.INVALID_SORT, [{ detail, ...at }])
}
