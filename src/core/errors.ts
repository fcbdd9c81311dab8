/**
 * The one catalogue of error codes (CONTRACT §1). Codes are never renamed or reused;
 * docs/errors.md lists every one of them and a unit test checks it.
 */
export interface ErrorDef {
  readonly status: number
  readonly code: string
  readonly title: string
}

function def(status: number, code: string, title: string): ErrorDef {
  return Object.freeze({ status, code, title })
}

export const Errors = {
  INVALID_REQUEST: def(400, 'invalid_request', 'The request is malformed'),
  INVALID_FILTER: def(400, 'invalid_filter', 'The filter is not valid'),
  INVALID_SORT: def(400, 'invalid_sort', 'The sort is not valid'),
  INVALID_PAGE: def(400, 'invalid_page', 'The page is not valid'),
  INVALID_INCLUDE: def(400, 'invalid_include', 'The include is not valid'),
  UNAUTHORIZED: def(401, 'unauthorized', 'Authentication is required'),
  API_KEY_INACTIVE: def(401, 'api_key_inactive', 'The API key is inactive'),
  FORBIDDEN: def(403, 'forbidden', 'The API key may not do this'),
  IP_NOT_ALLOWED: def(403, 'ip_not_allowed', 'The client address is not allowed'),
  API_ACCESS_DISABLED: def(403, 'api_access_disabled', 'The organization has no API access'),
  NOT_FOUND: def(404, 'not_found', 'Not found'),
  METHOD_NOT_ALLOWED: def(405, 'method_not_allowed', 'Method not allowed'),
  UNIQUE_VIOLATION: def(409, 'unique_violation', 'A unique value is already taken'),
  DUPLICATE_RELATIONSHIP: def(409, 'duplicate_relationship', 'The relationship exists already'),
  IDEMPOTENCY_KEY_IN_USE: def(409, 'idempotency_key_in_use', 'A request with this Idempotency-Key is still running'),
  CURSOR_EXPIRED: def(410, 'cursor_expired', 'The cursor is older than the event retention'),
  PAYLOAD_TOO_LARGE: def(413, 'payload_too_large', 'The request body is too large'),
  VALIDATION_FAILED: def(422, 'validation_failed', 'The data is not valid'),
  TOO_MANY_ITEMS: def(422, 'too_many_items', 'Too many items in one bulk request'),
  IDEMPOTENCY_KEY_REUSED: def(422, 'idempotency_key_reused', 'The Idempotency-Key was used with another request body'),
  RATE_LIMIT_EXCEEDED: def(429, 'rate_limit_exceeded', 'The rate limit is exceeded'),
  INTERNAL_ERROR: def(500, 'internal_error', 'Internal error'),
  SERVICE_UNAVAILABLE: def(503, 'service_unavailable', 'The service is not ready'),
  QUERY_TIMEOUT: def(503, 'query_timeout', "A statement ran past the server's statement timeout"),
  // Answered by the HTTP layer before any route runs (src/core/http-layer.ts).
  REQUEST_TIMEOUT: def(408, 'request_timeout', 'The request did not arrive in time'),
  HEADERS_TOO_LARGE: def(431, 'headers_too_large', 'The request headers are too large'),
  NOT_IMPLEMENTED: def(501, 'not_implemented', 'The server does not support what the request needs'),
} as const

export type ErrorKey = keyof typeof Errors

/** One entry of the CONTRACT's `errors` array. */
export interface Issue {
  detail: string
  /** JSON pointer into the request body (`source.pointer`). */
  pointer?: string
  /** Query parameter name (`source.parameter`). */
  parameter?: string
  meta?: Record<string, unknown>
  /**
   * This entry's own status and code, when one answer lists failures of several kinds (a bulk
   * request: invalid items beside duplicates); the error's own otherwise.
   */
  def?: ErrorDef
}

/**
 * An error the API answers with. It holds a list of issues so that a bulk request can fail once
 * with every failing item.
 */
export class AppError extends Error {
  readonly def: ErrorDef
  readonly issues: Issue[]
  readonly headers: Record<string, string>

  constructor(errorDef: ErrorDef, issues: Issue[] | string, headers: Record<string, string> = {}) {
    const list = typeof issues === 'string' ? [{ detail: issues }] : issues
    super(list[0]?.detail ?? errorDef.title)
    this.name = 'AppError'
    this.def = errorDef
    this.issues = list.length > 0 ? list : [{ detail: errorDef.title }]
    this.headers = headers
  }

  get status(): number {
    return this.def.status
  }
}

export function errorBody(err: AppError): { errors: Record<string, unknown>[] } {
  return {
    errors: listed(err.issues).map((issue) => {
      const own = issue.def ?? err.def
      const entry: Record<string, unknown> = {
        status: String(own.status),
        code: own.code,
        detail: issue.detail,
      }
      if (issue.pointer !== undefined) entry.source = { pointer: issue.pointer }
      else if (issue.parameter !== undefined) entry.source = { parameter: issue.parameter }
      if (issue.meta !== undefined) entry.meta = issue.meta
      return entry
    }),
  }
}

/**
 * The most failures an answer lists for one item of a bulk request (`meta.index`), or for a body
 * that is not one: a body of 8 MB can hold a million unknown members, whose answer of 190 MB and
 * some GB of memory told nothing the first hundred do not.
 */
export const MAX_LISTED_FAILURES = 100

/**
 * Each item's first MAX_LISTED_FAILURES issues; after them, one entry saying how many more there
 * are, with the kind, pointer and meta of the first one left out. Every failing item is still
 * listed (CONTRACT §1).
 */
function listed(issues: readonly Issue[]): readonly Issue[] {
  if (issues.length <= MAX_LISTED_FAILURES) return issues
  const shown = new Map<unknown, number>()
  // Per item: how many are left out, the first of them, and where its last listed one stands.
  const left = new Map<unknown, { count: number; first: Issue }>()
  const lastShown = new Map<unknown, number>()
  const kept: Issue[] = []
  for (const issue of issues) {
    const item = issue.meta?.index
    const count = (shown.get(item) ?? 0) + 1
    shown.set(item, count)
    if (count <= MAX_LISTED_FAILURES) {
      lastShown.set(item, kept.push(issue) - 1)
      continue
    }
    const more = left.get(item)
    if (more) more.count += 1
    else left.set(item, { count: 1, first: issue })
  }
  if (left.size === 0) return kept
  const summaryAfter = new Map([...left].map(([item, more]) => [lastShown.get(item)!, more]))
  return kept.flatMap((issue, i) => {
    const more = summaryAfter.get(i)
    return more ? [issue, notListed(more.count, more.first)] : [issue]
  })
}

/** The entry that says how many failures like `first` (and after it) an answer leaves out. */
function notListed(count: number, first: Issue): Issue {
  const index = first.meta?.index
  const failures = `${count.toLocaleString('en-US')} more ${count === 1 ? 'failure' : 'failures'}`
  return {
    detail: typeof index === 'number'
      ? `${failures} of item ${index} not listed: an answer lists the first ${MAX_LISTED_FAILURES} of each item`
      : `${failures} not listed: an answer lists the first ${MAX_LISTED_FAILURES}`,
    ...(first.pointer !== undefined ? { pointer: typeof index === 'number' ? `/${index}` : '' } : {}),
    ...(first.pointer === undefined && first.parameter !== undefined ? { parameter: first.parameter } : {}),
    ...(first.meta !== undefined ? { meta: first.meta } : {}),
    ...(first.def !== undefined ? { def: first.def } : {}),
  }
}

export function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`)
}
