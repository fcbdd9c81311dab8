import { AppError, Errors, type ErrorDef } from '../core/errors.js'
import { readBodyPage, type Page } from '../core/pagination.js'
import { escapePointer, parseFilter } from '../query/parse.js'
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

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function fail(def: ErrorDef, pointer: string, detail: string): never {
  throw new AppError(def, [{ detail, pointer }])
}

/** Rejects members outside `allowed`, pointing at the first one. */
export function checkMembers(body: Record<string, unknown>, allowed: readonly string[], at = ''): void {
  const extra = Object.keys(body).find((key) => !allowed.includes(key))
  if (extra !== undefined) {
    fail(Errors.INVALID_REQUEST, `${at}/${escapePointer(extra)}`, `unknown member "${extra}"; the body takes ${allowed.join(', ')}`)
  }
}

/**
 * Reads a search body. A missing body means "everything, first page"; a body that is not an
 * object is 400 invalid_request.
 */
export function parseSearchBody(body: unknown, target: Target): SearchBody {
  const json = body ?? {}
  if (!isObject(json)) fail(Errors.INVALID_REQUEST, '', 'the body must be a JSON object {filter, sort, page, include}')
  checkMembers(json, MEMBERS[target])
  return {
    filter: parseFilter(json.filter, '/filter'),
    sort: parseSortBody(json.sort, '/sort'),
    page: parsePage(json.page, '/page'),
    include: json.include,
    relationships: json.relationships,
  }
}

/** `{number, size}`, both optional: number 1..1e9 (default 1), size 1..100 (default 50). */
export function parsePage(value: unknown, pointer: string): Page {
  const page = readBodyPage(value)
  if ('member' in page) fail(Errors.INVALID_PAGE, page.member ? `${pointer}/${page.member}` : pointer, page.detail)
  return page
}

