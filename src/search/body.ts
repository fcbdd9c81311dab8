import { Errors } from '../core/errors.js'
import { checkMembers, failAt, isObject } from '../core/json.js'
import { parseBodyPage, type Page } from '../core/pagination.js'
import { parseFilter } from '../query/parse.js'
import { parseSortBody, type SortSpec } from '../query/sort.js'
import type { FilterNode } from '../query/ast.js'
import type { Target } from '../query/fields.js'

/**
 * The shape of a search body (CONTRACT §4), checked by hand rather than by the route's JSON
 * Schema so that each member fails with its own code and a pointer into the body:
 * unknown member → invalid_request, filter → invalid_filter, sort → invalid_sort,
 * page → invalid_page (include and the relationships block are read by their owners).
 */

export interface SearchBody {
  filter: FilterNode | null
  sort: SortSpec[]
  page: Page
  include: unknown
  relationships: unknown
}

const MEMBERS: Readonly<Record<Target, readonly string[]>> = {
  assets: ['filter', 'sort', 'page', 'include', 'relationships'],
  // The relationships block pages the relationships included in assets: nothing to do here.
  relationships: ['filter', 'sort', 'page', 'include'],
}

/**
 * Reads a search body. A missing body means "everything, first page"; a body that is not an
 * object is 400 invalid_request.
 */
export function parseSearchBody(body: unknown, target: Target): SearchBody {
  const json = body ?? {}
  if (!isObject(json)) failAt(Errors.INVALID_REQUEST, '', 'the body must be a JSON object {filter, sort, page, include}')
  checkMembers(json, MEMBERS[target])
  return {
    filter: parseFilter(json.filter, '/filter'),
    sort: parseSortBody(json.sort, '/sort'),
    page: parseBodyPage(json.page, '/page'),
    include: json.include,
    relationships: json.relationships,
  }
}
