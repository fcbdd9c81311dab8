import type { Queryable } from '../store/db.js'
import type { AuthContext } from '../core/auth/context.js'
import { scopeCondition } from '../access/scope.js'
import { Params, selectPage, type DocRow, type PageRows } from '../store/sql.js'
import { cloudEventJsonSql, eventSource, withoutFromSql } from '../outbox/cloud-event.js'

/**
 * The FROM clause of every event read: `events e`; `t`, the relationship target's scoping
 * columns under the names `scopeCondition` expects; `f`, the asset's before a move to another
 * access domain (its domain then: the `from` of the event's `access_domain_key` change). Lateral
 * rows, no join.
 */
export const EVENTS_FROM = `events e CROSS JOIN LATERAL (SELECT e.related_asset_type_key AS asset_type_key, e.related_access_domain_key AS access_domain_key) t
  CROSS JOIN LATERAL (SELECT e.asset_type_key, e.data #>> '{changes,access_domain_key,from}' AS access_domain_key) f`

/**
 * The `data` of an event as this key may read it: as stored, but for the move of an asset out of
 * an access domain the key cannot see, whose changes it gets without their `from` values
 * (withoutFromSql). `e.data` itself when the key sees every domain. A move out of no access
 * domain has a `from` of JSON null, read as SQL NULL, where a grant's `domain = $n` is NULL rather
 * than false: `IS NOT TRUE` counts that as not seen (a plain `NOT` left the values before a move
 * out of no domain to keys that never saw it).
 */
function visibleDataSql(auth: AuthContext, params: Params): string {
  const before = scopeCondition(auth, 'f', 'view', params)
  if (before === 'TRUE') return 'e.data'
  return `CASE WHEN e.data #> '{changes,access_domain_key}' IS NOT NULL AND (${before}) IS NOT TRUE THEN ${withoutFromSql('e.data', '{changes}')} ELSE e.data END`
}

/**
 * The events this key may see, ANDed into the statement (CONTRACT §13): asset events when the
 * key's grants reach the asset's type and access domain at the event; relationship events when
 * they reach both ends; API key events only with Admin. Only stamped events are ever read.
 */
export function visibleEvents(auth: AuthContext, params: Params): string {
  const own = scopeCondition(auth, 'e', 'view', params)
  const target = scopeCondition(auth, 't', 'view', params)
  const assets = `e.asset_id IS NOT NULL AND ${own} AND (e.related_asset_id IS NULL OR ${target})`
  const keys = auth.permission === 'Admin' ? ' OR e.asset_id IS NULL' : ''
  return `e.sequence IS NOT NULL AND (${assets}${keys})`
}

export interface FeedQuery {
  after: number
  types: string[] | null
  subject: string | null
  /** The asset or relationship id a subject names, for the index (null for api-keys/…). */
  subjectAssetId: string | null
  limit: number
}

/** A feed row: the event's CloudEvent as JSON text (cloudEventJsonSql) and its position. */
export interface FeedRow extends DocRow {
  sequence: number | string
}

/** One feed page, oldest first, one row past it (has_more). */
export async function selectFeed(db: Queryable, auth: AuthContext, q: FeedQuery): Promise<FeedRow[]> {
  const params = new Params([auth.orgId, q.after])
  const where = ['e.org_id = $1', 'e.sequence > $2', visibleEvents(auth, params)]
  if (q.types) where.push(`e.type = ANY(${params.add(q.types)}::text[])`)
  if (q.subject !== null) where.push(`e.subject = ${params.add(q.subject)}`)
  // assets/<id>: the same rows, found through the asset's index instead of the whole feed.
  if (q.subject?.startsWith('assets/') && q.subjectAssetId !== null) where.push(`e.asset_id = ${params.add(q.subjectAssetId)}::uuid`)
  const source = params.add(JSON.stringify(eventSource(auth.orgKey)))
  const result = await db.query<FeedRow>(
    `SELECT ${cloudEventJsonSql(source, visibleDataSql(auth, params))} AS doc, e.sequence FROM ${EVENTS_FROM} WHERE ${where.join(' AND ')} ORDER BY e.sequence LIMIT ${params.add(q.limit + 1)}`,
    params.values,
  )
  return result.rows
}

/**
 * The organization's data version on this store: the last position stamped, or null while events
 * of committed writes still wait for theirs. Every write of assets or relationships writes its
 * events in its own transaction, and positions are given in commit order after it, so two reads
 * answering the same version saw the same committed data, whichever process wrote it. On
 * PostgreSQL (counts/cache.ts: remembered results are answered for the version they were taken at).
 *
 * A scalar subquery, the organization bound to `org`, so that a statement the request runs anyway
 * can select it (store/sql.ts selectPage): a call of `kbis_data_version` (migration 0017), a
 * PL/pgSQL function whose two statements are planned once per connection, not with every page.
 * Each of its conditions is one partial index's exactly (`events_unstamped_org`, `events_feed`):
 * without statistics on events the planner otherwise intersected the organization's whole
 * primary key range with the unstamped rows (2 ms at 20,000 events, and growing with them).
 */
export function dataVersionSql(org: string): string {
  return `SELECT kbis_data_version(${org})`
}

/** {@link dataVersionSql} as a statement of its own. */
export async function selectDataVersion(db: Queryable, orgId: string): Promise<string | null> {
  const result = await db.query<{ v: string | null }>(`SELECT (${dataVersionSql('$1')}) AS v`, [orgId])
  return result.rows[0]?.v ?? null
}

/**
 * Where an organization's feed stands: the highest position retention purged (0: none) and the
 * highest position stamped so far (null: none). Read before a page: every event at or below
 * `head` is visible to the page's later snapshot, and every event stamped afterwards gets a
 * higher position (decision 0003).
 */
export async function selectFeedBounds(db: Queryable, orgId: string): Promise<{ purged: number; head: number | null }> {
  const result = await db.query<{ purged: number | string | null; head: number | string | null }>(
    `SELECT (SELECT purged_through FROM event_retention WHERE org_id = $1) AS purged,
            (SELECT max(sequence) FROM events WHERE org_id = $1 AND sequence IS NOT NULL) AS head`,
    [orgId],
  )
  const row = result.rows[0]
  return { purged: Number(row?.purged ?? 0), head: row?.head === null || row?.head === undefined ? null : Number(row.head) }
}

/**
 * An asset's events and those of relationships touching it, newest first, one page and its count;
 * each event as its CloudEvent's JSON text, as the feed reads it (cloudEventJsonSql).
 */
export async function selectHistoryPage(db: Queryable, auth: AuthContext, assetId: string, limit: number, offset: number): Promise<PageRows<DocRow>> {
  const params = new Params([auth.orgId, assetId])
  const where = `e.org_id = $1 AND (e.asset_id = $2 OR e.related_asset_id = $2) AND ${visibleEvents(auth, params)}`
  // The event's source is bound for the page's columns only: the count of a full page binds the
  // conditions' values alone (with it too, every full page answered 500).
  const select = (page: Params) => `${cloudEventJsonSql(page.add(JSON.stringify(eventSource(auth.orgKey))), visibleDataSql(auth, page))} AS doc`
  return selectPage<DocRow>(db, { select, from: EVENTS_FROM, docRows: true }, {
    where,
    orderBy: 'e.sequence DESC',
    limit,
    offset,
    params,
  })
}
