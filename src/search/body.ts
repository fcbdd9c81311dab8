import { DEFAULT_PAGE_SIZE, type Page } from '../core/pagination.js'
import { parseFilter } from '../query/parse.js'
import type { SortOrder, SortSpec } from '../query/sort.js'
import type { FilterNode } from '../query/ast.js'

/**
 * A search body (CONTRACT §4) once the route's schema has accepted it (search/schemas.ts): the
 * defaults filled in and the filter tree parsed, the only part read by hand. `include` and the
 * relationships block are read by their owners.
 */

export interface SearchBody {
  filter: FilterNode | null
  sort: SortSpec[]
  page: Page
  include: unknown
  relationships: unknown
}

/** What the schema lets through (every member optional, `null` as absent). */
interface ValidBody {
  filter?: unknown
  sort?: { field: string; order?: SortOrder }[] | null
  page?: { number?: number; size?: number; count?: 'exact' } | null
  include?: unknown
  relationships?: unknown
}

export function readSearchBody(body: unknown): SearchBody {
  const json = (body ?? {}) as ValidBody
  const page = json.page ?? {}
  return {
    filter: parseFilter(json.filter, '/filter'),
    sort: (json.sort ?? []).map((entry, i) => Object.freeze({ field: entry.field, order: entry.order ?? 'asc', pointer: `/sort/${i}` })),
    page: { number: page.number ?? 1, size: page.size ?? DEFAULT_PAGE_SIZE, ...(page.count === 'exact' ? { count: 'exact' as const } : {}) },
    include: json.include,
    relationships: json.relationships,
  }
}
