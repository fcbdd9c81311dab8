import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { isUuid } from '../core/time.js'
import { offsetOf, pageMeta, type JsonPage, type Page } from '../core/pagination.js'
import { findAsset } from '../assets/service.js'
import { compositeKeyProblem, parseAssetRef } from '../metamodel/refs.js'
import { EVENT_TYPES } from '../outbox/cloud-event.js'
import { selectFeed, selectFeedBounds, selectHistoryPage } from './sql.js'

export const DEFAULT_FEED_SIZE = 100
export const MAX_FEED_SIZE = 1000

/** Cursors are opaque to clients: base64url of the last position read (`sequence`). */
export function encodeCursor(sequence: number): string {
  return Buffer.from(`s${sequence}`).toString('base64url')
}

export function decodeCursor(cursor: string): number {
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : ''
  const match = /^s(0|[1-9]\d{0,15})$/.exec(text)
  if (!match || !Number.isSafeInteger(Number(match[1]))) {
    throw new AppError(Errors.INVALID_REQUEST, [{ detail: 'after must be a next_cursor this API returned', parameter: 'after' }])
  }
  return Number(match[1])
}

export interface FeedRequest {
  after?: string
  types?: string
  subject?: string
  size?: number
}

/** A feed page: its events as the store wrote their JSON (decision 0017), and where to read on. */
export interface FeedPage {
  json: string[]
  meta: { next_cursor: string; has_more: boolean }
}

/**
 * GET /events (CONTRACT §13): stamped events after the cursor, oldest first, scoped to the key.
 * `next_cursor` is the last position returned when more follow; on the last page, the feed's
 * head as it stood before the page was read, past the events the key does not see or the filters
 * leave out, so that a poller simply keeps calling with it and a consumer whose filter matches
 * nothing for months does not fall behind retention (410) with nothing missed. A cursor below
 * what retention purged answers 410.
 */
export async function readFeed(ctx: RequestContext, req: FeedRequest): Promise<FeedPage> {
  const after = req.after === undefined ? null : decodeCursor(req.after)
  const { purged, head } = await selectFeedBounds(ctx.db, ctx.auth.orgId)
  if (after !== null && after < purged) {
    throw new AppError(Errors.CURSOR_EXPIRED, [{ detail: 'events after this cursor have been purged by retention; start again without after', parameter: 'after' }])
  }
  // Every cursor the feed hands out is at most the organization's head (or what retention purged
  // of it): one past it was made up, and would skip the events up to it without a word.
  if (after !== null && after > Math.max(head ?? 0, purged)) {
    throw new AppError(Errors.INVALID_REQUEST, [{ detail: 'after is past the newest event of this organization: it must be a next_cursor this API returned', parameter: 'after' }])
  }
  const from = after ?? purged
  const types = req.types === undefined ? null : eventTypes(req.types)
  const subject = req.subject === undefined ? null : await eventSubject(ctx, req.subject)
  const size = req.size ?? DEFAULT_FEED_SIZE
  const rows = await selectFeed(ctx.db, ctx.auth, {
    after: from,
    types,
    subject,
    subjectAssetId: subject?.split('/')[1] ?? null,
    limit: size,
  })
  const page = rows.slice(0, size)
  const more = rows.length > size
  const last = page.at(-1) === undefined ? from : Number(page.at(-1)!.sequence)
  return {
    json: page.map((row) => row.doc),
    meta: { next_cursor: encodeCursor(more ? last : Math.max(last, head ?? 0)), has_more: more },
  }
}

/** `filter[type]`: comma-separated types of CONTRACT §13; a type that does not exist is a typo, not an empty feed. */
function eventTypes(list: string): string[] {
  const types = list.split(',').map((t) => t.trim())
  // An empty list or entry is a mistake of the client's (a list built from nothing): not "every type".
  if (types.includes('')) {
    throw new AppError(Errors.INVALID_FILTER, [{
      detail: `filter[type] ${list.trim() === '' ? 'is empty' : 'has an empty entry'}: give one or more event types, comma-separated, e.g. asset.created,asset.updated (leave filter[type] out for every type)`,
      parameter: 'filter[type]',
    }])
  }
  const unknown = types.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t))
  if (unknown.length > 0) {
    throw new AppError(Errors.INVALID_FILTER, [{
      detail: `filter[type]: ${unknown.map((t) => JSON.stringify(t)).join(', ')} ${unknown.length === 1 ? 'is not an event type' : 'are not event types'}; the types are ${EVENT_TYPES.join(', ')}`,
      parameter: 'filter[type]',
    }])
  }
  return types
}

/** A subject no event has (the nil UUID): what a composite key that names no live asset the key sees filters for. */
const NO_SUBJECT = 'assets/00000000-0000-0000-0000-000000000000'

/**
 * `filter[subject]`: `assets/<id>`, `relationships/<id>` or `api-keys/<id>`, the id a UUID (any
 * case); an asset also by its composite key, as wherever an asset is named (CONTRACT §2): the
 * live asset it names now. One that names no asset the key can see filters for nothing, as an
 * unknown UUID does.
 */
async function eventSubject(ctx: RequestContext, subject: string): Promise<string> {
  const [kind, id, ...rest] = subject.split('/')
  const known = rest.length === 0 && (kind === 'assets' || kind === 'relationships' || kind === 'api-keys') && id !== undefined
  if (known && isUuid(id)) return `${kind}/${id.toLowerCase()}`
  if (known && kind === 'assets' && parseAssetRef(id, ctx.metamodel) !== null) {
    const asset = await findAsset(ctx, id, 'view').catch((err: unknown) => {
      if (err instanceof AppError && err.def === Errors.NOT_FOUND) return null
      throw err
    })
    return asset ? `assets/${asset.id}` : NO_SUBJECT
  }
  const keyProblem = known && kind === 'assets' ? compositeKeyProblem(id, ctx.metamodel) : null
  if (keyProblem !== null) throw new AppError(Errors.INVALID_FILTER, [{ detail: `filter[subject]: ${keyProblem}`, parameter: 'filter[subject]' }])
  throw new AppError(Errors.INVALID_FILTER, [{
    detail: 'filter[subject] must be assets/<id>, relationships/<id> or api-keys/<id>, the id a UUID (an asset also by its composite key, e.g. assets/server:hostname:web-01)',
    parameter: 'filter[subject]',
  }])
}

/**
 * GET /assets/{id}/history: the events of a live asset the key can see (UUID or composite key;
 * otherwise 404 like every asset read), with those of the relationships touching it whose other
 * end it can see, newest first, as the store writes their JSON (decision 0017).
 */
export async function readHistory(ctx: RequestContext, ref: string, page: Page): Promise<JsonPage> {
  const asset = await findAsset(ctx, ref, 'view')
  const result = await selectHistoryPage(ctx.db, ctx.auth, asset.id, page.size, offsetOf(page))
  return { json: result.rows.map((row) => row.doc), page: pageMeta(page, result) }
}
