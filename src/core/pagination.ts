import type { FastifyReply, FastifyRequest } from 'fastify'
import { COUNT_CAP, type Counted } from '../store/sql.js'

export interface Page {
  number: number
  size: number
  /** `page[count]=exact` / `"page": {"count": "exact"}`: count past {@link COUNT_CAP} (CONTRACT §1). */
  count?: 'exact'
}

/** Whether items follow this page; kept off the JSON (a symbol key) and read by {@link pageLinks}. */
export const MORE: unique symbol = Symbol('more')

export interface PageMeta {
  number: number
  size: number
  total_items: number
  total_items_exact: boolean
  total_pages: number
  [MORE]?: boolean
}

export const DEFAULT_PAGE_SIZE = 50
export const MAX_PAGE_SIZE = 100
/**
 * Any page number a client can write exactly (CONTRACT §3: a page past the end is empty); beyond
 * 2^53 a number is no longer an integer in JSON's usual reading. OFFSET stays within bigint.
 */
export const MAX_PAGE_NUMBER = Number.MAX_SAFE_INTEGER

/**
 * {@link COUNT_CAP} with thousands separators, for the schemas' descriptions: written without
 * `toLocaleString`, whose first call loads ICU's number formats (≈ 25 ms of every server start,
 * which builds these schemas before it listens).
 */
const COUNT_CAP_TEXT = String(COUNT_CAP).replace(/\B(?=(\d{3})+$)/g, ',')

/**
 * Query-string schema members for `page[number]` and `page[size]` (validated by Fastify's Ajv),
 * and `page[count]` on lists whose total is counted (`withCount`).
 */
export function pageQuerySchema(prefix = 'page', withCount = prefix === 'page'): Record<string, unknown> {
  return {
    [`${prefix}[number]`]: { type: 'integer', minimum: 1, maximum: MAX_PAGE_NUMBER, description: 'Page number, from 1 (default 1).' },
    [`${prefix}[size]`]: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, description: `Page size, 1..${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).` },
    ...(withCount
      ? {
          [`${prefix}[count]`]: {
            type: 'string',
            enum: ['exact'],
            description: `\`exact\`: count every match. Without it \`total_items\` is exact up to ${COUNT_CAP_TEXT} matches; beyond, it is ${COUNT_CAP_TEXT} and \`total_items_exact\` is false.`,
          },
        }
      : {}),
  }
}

export function pageFromQuery(query: Record<string, unknown>, prefix = 'page'): Page {
  return {
    number: (query[`${prefix}[number]`] as number | undefined) ?? 1,
    size: (query[`${prefix}[size]`] as number | undefined) ?? DEFAULT_PAGE_SIZE,
    ...(query[`${prefix}[count]`] === 'exact' ? { count: 'exact' as const } : {}),
  }
}

/**
 * The page's meta. A plain number is an exact total (lists held in memory, included relationships);
 * a {@link Counted} comes from `selectPage` and may be capped.
 */
export function pageMeta(page: Page, counted: number | Counted): PageMeta {
  const c = typeof counted === 'number' ? { total: counted, exact: true, more: page.number * page.size < counted } : counted
  return { number: page.number, size: page.size, total_items: c.total, total_items_exact: c.exact, total_pages: Math.ceil(c.total / page.size), [MORE]: c.more }
}

/**
 * `relationships_meta.page` of included relationships: counted exactly per asset, so
 * `total_items_exact` is always true (the same page object as every list's, CONTRACT §1).
 */
export function includedPageMeta(page: Page, total: number): Omit<PageMeta, typeof MORE> {
  return { number: page.number, size: page.size, total_items: total, total_items_exact: true, total_pages: Math.ceil(total / page.size) }
}

export function offsetOf(page: Page): number {
  return (page.number - 1) * page.size
}

/**
 * A URL the API hands out (`links`, `Location`): the configured public URL (`KBIS_PUBLIC_URL`)
 * followed by the path, or the path alone — never built from the request's Host header.
 */
export function publicUrl(request: FastifyRequest, path: string): string {
  return `${request.server.config.publicUrl ?? ''}${path}`
}

/** The `Location` of a resource created under /api/v1, e.g. `locationOf(request, 'assets', id)`. */
export function locationOf(request: FastifyRequest, collection: string, id: string): string {
  return publicUrl(request, `/api/v1/${collection}/${encodeURIComponent(id)}`)
}

/** The scheme and authority of a request target in absolute form (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i

/**
 * JSON:API-style links for a GET list, keeping every other query parameter as sent. They start with
 * the configured public URL (`KBIS_PUBLIC_URL`), else they are relative paths: never the request's
 * Host header, which a client (or an attacker in front of a cache) chooses (CONTRACT §1).
 */
export function pageLinks(request: FastifyRequest, meta: PageMeta): Record<string, string | null> {
  // The path as requested; a request line in absolute form (`GET http://host/api/v1/… HTTP/1.1`)
  // names a host too, which goes the way of the Host header.
  const base = publicUrl(request, request.url.replace(ABSOLUTE_FORM, '').split('?')[0]!)
  const query = new URLSearchParams(request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '')
  const link = (n: number): string => {
    query.set('page[number]', String(n))
    query.set('page[size]', String(meta.size))
    return `${base}?${query.toString().replaceAll('%5B', '[').replaceAll('%5D', ']')}`
  }
  const last = Math.max(meta.total_pages, 1)
  // A capped count has no last page to name; past it, pages go on while items follow.
  const more = meta[MORE] ?? meta.number < meta.total_pages
  return {
    self: link(meta.number),
    first: link(1),
    prev: meta.number > 1 ? link(meta.total_items_exact ? Math.min(meta.number - 1, last) : meta.number - 1) : null,
    next: more ? link(meta.number + 1) : null,
    last: meta.total_items_exact ? link(last) : null,
  }
}

/**
 * A page whose records the store wrote as JSON text (list and search reads without includes):
 * the response is assembled from that text, never parsed and written again (decision 0017).
 */
export interface JsonPage {
  json: string[]
  page: PageMeta
}

/**
 * A response body `{"data": [...], ...rest}` from records already in JSON (`docs`), with the other
 * members (`meta`, `links`) written by JSON.stringify in the order given, as the route's response
 * schema would write them. The route returns the text; Fastify sends a string with a JSON content
 * type as it is.
 *
 * @example jsonDataBody(reply, ['{"id":"…"}'], { meta: { page } })  // '{"data":[{"id":"…"}],"meta":{"page":{…}}}'
 */
export function jsonDataBody(reply: FastifyReply, docs: readonly string[], rest: Record<string, unknown>): string {
  void reply.header('content-type', 'application/json; charset=utf-8')
  const tail = JSON.stringify(rest)
  return `{"data":[${docs.join(',')}]${tail === '{}' ? '}' : `,${tail.slice(1)}`}`
}
