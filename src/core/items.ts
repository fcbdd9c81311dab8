import { AppError, Errors, type ErrorDef, type Issue } from './errors.js'

/** Items per bulk request (spec "Limits"). */
export const MAX_BULK_ITEMS = 10_000

/** What every bulk item may carry beside its payload. */
export interface BulkItem {
  client_ref?: string | null
}

/** One entry of the bulk envelope (CONTRACT §1), in request order. */
export interface BulkEntry {
  id: string
  client_ref: string | null
}

export function entryOf(id: string, item: BulkItem): BulkEntry {
  return { id, client_ref: item.client_ref ?? null }
}

/** Cheap, before any schema work: a 10,001-item body is refused without validating its items. */
export function assertItemCount(body: unknown): void {
  // A bulk body is a JSON array (CONTRACT §5); anything else is a malformed request, not invalid items.
  if (!Array.isArray(body)) {
    throw new AppError(Errors.INVALID_REQUEST, [
      { detail: `a bulk request body must be a JSON array of items; this one is ${body === undefined ? 'missing' : body === null ? 'null' : typeof body === 'object' ? 'an object' : `a ${typeof body}`}`, pointer: '' },
    ])
  }
  if (Array.isArray(body) && body.length > MAX_BULK_ITEMS) {
    throw new AppError(Errors.TOO_MANY_ITEMS, [
      { detail: `a bulk request carries at most ${MAX_BULK_ITEMS} items; this one has ${body.length}`, pointer: '' },
    ])
  }
}

/** The item a pointer such as `/3/properties/x` points into, or null. */
export function itemIndexOf(pointer: string | undefined): number | null {
  const match = pointer === undefined ? null : /^\/(\d+)(?:\/|$)/.exec(pointer)
  return match ? Number(match[1]) : null
}

/**
 * Issues are produced with a pointer (`/<index>/…`); this one place adds `meta: {index,
 * client_ref}` from the body (keeping any meta already there) and orders the list by item, so
 * schema errors, services and the relationship helpers all report items the same way.
 */
export function withItemMeta(err: AppError, body: unknown): AppError {
  if (!Array.isArray(body)) return err
  const annotated = err.issues.map((issue, order) => {
    const index = itemIndexOf(issue.pointer)
    if (index === null || index >= body.length) return { issue, index, order }
    const ref = (body[index] as { client_ref?: unknown } | null)?.client_ref
    const meta = { index, client_ref: typeof ref === 'string' ? ref : null, ...issue.meta }
    return { issue: { ...issue, meta }, index, order }
  })
  annotated.sort((a, b) => (a.index ?? -1) - (b.index ?? -1) || a.order - b.order)
  return new AppError(err.def, annotated.map((a) => a.issue), err.headers)
}

/** Which kind of failure gives a bulk answer its status when items fail in several ways. */
const PRECEDENCE: readonly ErrorDef[] = [Errors.INVALID_REQUEST, Errors.VALIDATION_FAILED, Errors.FORBIDDEN, Errors.UNIQUE_VIOLATION, Errors.DUPLICATE_RELATIONSHIP]

/**
 * Every failing item of a bulk request, of every kind, so that one answer lists them all
 * (CONTRACT §1): each entry keeps its own status and code, and the answer takes the status of
 * the first kind present in the order 400, 422, 403, 409. Items that failed are left out of the
 * later checks (`failed`), which still run for the others.
 */
export class ItemFailures {
  private readonly byKind = new Map<ErrorDef, Issue[]>()
  /** Indexes of the items that failed so far. */
  readonly failed = new Set<number>()

  add(def: ErrorDef, issues: readonly Issue[]): void {
    if (issues.length === 0) return
    const list = this.byKind.get(def) ?? []
    for (const issue of issues) {
      list.push({ ...issue, def })
      const index = itemIndexOf(issue.pointer)
      if (index !== null) this.failed.add(index)
    }
    this.byKind.set(def, list)
  }

  /**
   * Starts from the body's schema errors (Fastify's, attached to the request): each names its
   * item, which then skips every other check. A body with an error outside any item (it is not
   * an array) is refused as a whole, as before any item is looked at.
   */
  static fromSchema(errors: readonly (Issue & { def: ErrorDef })[]): ItemFailures {
    const failures = new ItemFailures()
    const outside = errors.filter((issue) => itemIndexOf(issue.pointer) === null)
    if (outside.length > 0) throw new AppError(outside[0]!.def, outside.map(({ def: _, ...issue }) => issue))
    // An item with an unknown member is malformed (400); its other schema errors are not listed.
    const malformed = new Set(errors.flatMap((issue) => (issue.def === Errors.INVALID_REQUEST ? [itemIndexOf(issue.pointer)] : [])))
    for (const { def, ...issue } of errors) {
      if (def !== Errors.INVALID_REQUEST && malformed.has(itemIndexOf(issue.pointer))) continue
      failures.add(def, [issue])
    }
    return failures
  }

  /** The issues of an error that lists several: each with its own kind when it has one (403s among 422s), else the error's. */
  addError(err: AppError): void {
    for (const issue of err.issues) {
      const { def, ...rest } = issue as Issue & { def?: ErrorDef }
      this.add(def ?? err.def, [rest])
    }
  }

  /** A copy to fill in one attempt of a transaction that may run again (store/retry.ts). */
  copy(): ItemFailures {
    const copy = new ItemFailures()
    for (const [def, issues] of this.byKind) copy.byKind.set(def, [...issues])
    for (const index of this.failed) copy.failed.add(index)
    return copy
  }

  throwIfAny(): void {
    const kind = PRECEDENCE.find((def) => this.byKind.has(def))
    if (kind) throw new AppError(kind, PRECEDENCE.flatMap((def) => this.byKind.get(def) ?? []))
  }
}

export interface UniqueClaim {
  index: number
  asset_type_key: string
  unique_value: string
}

/**
 * Claims of the same unique value for the same asset type inside one request: the first claim
 * may stand, each later one is a clash (found here, before any write).
 */
export function duplicateClaims(claims: readonly UniqueClaim[]): { claim: UniqueClaim; firstIndex: number }[] {
  // By type, then value: no composite key string per claim (10,000 of them per request).
  const first = new Map<string, Map<string, number>>()
  const clashes: { claim: UniqueClaim; firstIndex: number }[] = []
  for (const claim of claims) {
    let byValue = first.get(claim.asset_type_key)
    if (!byValue) first.set(claim.asset_type_key, (byValue = new Map()))
    const seen = byValue.get(claim.unique_value)
    if (seen === undefined) byValue.set(claim.unique_value, claim.index)
    else clashes.push({ claim, firstIndex: seen })
  }
  return clashes
}

/**
 * A single write (POST /assets, PATCH /assets/{id}, POST /relationships) runs as a bulk write of
 * one item; its errors point into the body itself: `/0/properties/x` becomes `/properties/x`,
 * `/0` no pointer, and `meta.index` (a bulk notion) is dropped.
 */
export async function asSingleItem<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    throw new AppError(err.def, err.issues.map(({ meta: _meta, pointer, ...issue }) => {
      const own = pointer?.replace(/^\/0(?=\/|$)/, '')
      return own ? { ...issue, pointer: own } : issue
    }), err.headers)
  }
}
