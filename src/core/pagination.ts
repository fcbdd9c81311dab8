import type { FastifyRequest } from 'fastify'

export interface Page {
  number: number
  size: number
}

export interface PageMeta {
  number: number
  size: number
  total_items: number
  total_pages: number
}

export const DEFAULT_PAGE_SIZE = 50
export const MAX_PAGE_SIZE = 100
/** Far past any real page (and OFFSET stays a safe integer). */
export const MAX_PAGE_NUMBER = 1_000_000_000

/**
 * Reads the `page` object of a JSON body (`{number?, size?}`, defaults 1 and 50). Returns the page,
 * or the member at fault ('' for the object itself) and why, for the caller's error.
 */
export function readBodyPage(value: unknown): Page | { member: string; detail: string } {
  if (value === undefined || value === null) return { number: 1, size: DEFAULT_PAGE_SIZE }
  if (typeof value !== 'object' || Array.isArray(value)) return { member: '', detail: 'page must be an object {"number", "size"}' }
  const extra = Object.keys(value).find((key) => key !== 'number' && key !== 'size')
  if (extra !== undefined) return { member: extra.replaceAll('~', '~0').replaceAll('/', '~1'), detail: `unknown member "${extra}" in page; it has "number" and "size"` }
  const { number = 1, size = DEFAULT_PAGE_SIZE } = value as Record<string, unknown>
  if (!Number.isInteger(number) || (number as number) < 1 || (number as number) > MAX_PAGE_NUMBER) {
    return { member: 'number', detail: `number must be an integer in 1..${MAX_PAGE_NUMBER}` }
  }
  if (!Number.isInteger(size) || (size as number) < 1 || (size as number) > MAX_PAGE_SIZE) {
    return { member: 'size', detail: `size must be an integer in 1..${MAX_PAGE_SIZE}` }
  }
  return { number: number as number, size: size as number }
}

/** Query-string schema members for `page[number]` and `page[size]` (validated by Fastify's Ajv). */
export function pageQuerySchema(prefix = 'page'): Record<string, unknown> {
  return {
    [`${prefix}[number]`]: { type: 'integer', minimum: 1, maximum: MAX_PAGE_NUMBER, description: 'Page number, from 1 (default 1).' },
    [`${prefix}[size]`]: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, description: `Page size, 1..${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).` },
  }
}

export function pageFromQuery(query: Record<string, unknown>, prefix = 'page'): Page {
  return {
    number: (query[`${prefix}[number]`] as number | undefined) ?? 1,
    size: (query[`${prefix}[size]`] as number | undefined) ?? DEFAULT_PAGE_SIZE,
  }
}

export function pageMeta(page: Page, totalItems: number): PageMeta {
  return { number: page.number, size: page.size, total_items: totalItems, total_pages: Math.ceil(totalItems / page.size) }
}

export function offsetOf(page: Page): number {
  return (page.number - 1) * page.size
}

/** JSON:API-style links for a GET list, keeping every other query parameter as sent. */
export function pageLinks(request: FastifyRequest, meta: PageMeta): Record<string, string | null> {
  const base = `${request.protocol}://${request.host}${request.url.split('?')[0]}`
  const query = new URLSearchParams(request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '')
  const link = (n: number): string => {
    query.set('page[number]', String(n))
    query.set('page[size]', String(meta.size))
    return `${base}?${query.toString().replaceAll('%5B', '[').replaceAll('%5D', ']')}`
  }
  const last = Math.max(meta.total_pages, 1)
  return {
    self: link(meta.number),
    first: link(1),
    prev: meta.number > 1 ? link(Math.min(meta.number - 1, last)) : null,
    next: meta.number < meta.total_pages ? link(meta.number + 1) : null,
    last: link(last),
  }
}
