import type { Queryable, StoreKind, Tx } from '../store/db.js'
import { noteDataWrite } from '../counts/cache.js'
import { ORG_ROW, inIdOrder } from '../store/sql.js'
import { newId } from '../core/time.js'
import type { EventActor, EventData, EventType } from './cloud-event.js'
import { callerKeyId } from '../core/auth/context.js'

/*
 * The outbox writers (CONTRACT §13; docs/events.md, "Writing events"). Every write path calls
 * them in the transaction of its change, so an event exists exactly when its change committed.
 * Each call is ONE statement whatever the number of events (a bulk of 10,000 → one INSERT), with
 * the events as one json parameter, inserted in event id order. `sequence` is the organization's
 * position ({@link eventPositionSql}): NULL on PostgreSQL, where the relay stamps it after commit;
 * the organization's next positions on PGlite, whose transactions commit one after the other in
 * the order they run (decisions 0018, 0027). Either way a statement's events get their positions
 * in id order.
 */

/**
 * How events get their positions (decisions 0003 and 0018):
 * - `stamp` (PostgreSQL): writers leave `sequence` NULL; the relay stamps committed events after
 *   the fact, which is what keeps positions in commit order across concurrent transactions.
 * - `written` (PGlite): one process, one connection, one transaction after the other, so a
 *   position drawn when the event is written (the column's default) is already in commit order;
 *   the relay only hands the events to its hooks.
 */
export type Stamping = 'stamp' | 'written'

export function stampingOf(kind: StoreKind): Stamping {
  return kind === 'pglite' ? 'written' : 'stamp'
}

/**
 * The ORDER BY that makes a statement write its events in id order where positions are given as
 * they are written (the order {@link eventPositionSql} numbers them in, so the window's sort serves
 * both); nothing on PostgreSQL, whose relay stamps in id order (the sort of 10,000 events' rows
 * would spill to disk there for nothing).
 */
export function inEventIdOrder(db: Queryable, idColumn: string): string {
  return stampingOf(db.kind) === 'written' ? `ORDER BY ${idColumn}` : ''
}

/**
 * The highest position `org`'s events have had: its highest event, or after retention purged them
 * all, the highest purged (a position is never given twice, and a cursor stays valid). Positions
 * are per organization (decision 0027): an organization's numbers say nothing of the others'.
 */
export function highestPositionSql(org: string): string {
  return `coalesce((SELECT max(x.sequence) FROM events x WHERE x.org_id = ${org} AND x.sequence IS NOT NULL),
                   (SELECT r.purged_through FROM event_retention r WHERE r.org_id = ${org}), 0)`
}

/**
 * The `sequence` an event INSERT of organization `$1` writes, for rows in `idColumn` order: NULL
 * where the relay stamps after commit; where positions are given as events are written, the
 * organization's highest plus the row's rank (the statement holds the store's one transaction,
 * so no other writer numbers between the read and the commit). One event INSERT per statement:
 * two would both start from the same highest (the unique `events_feed` index refuses that).
 */
export function eventPositionSql(db: Queryable, idColumn: string): string {
  return stampingOf(db.kind) === 'written' ? `(SELECT ${highestPositionSql('$1')}) + row_number() OVER (ORDER BY ${idColumn})` : 'NULL'
}

/** Relays of this process, woken when this process has committed events (see relay.ts). */
const writeListeners = new Set<() => void>()

/** Calls `fn` each time this process commits a transaction that wrote events. */
export function onEventsWritten(fn: () => void): () => void {
  writeListeners.add(fn)
  return () => writeListeners.delete(fn)
}

/**
 * Says that `db` writes events: the relays of this process are woken once its transaction
 * commits (at once when `db` is the store itself, whose statement has then run). A request
 * that writes nothing (a search, an analytics query, a refused write, a dry run) wakes nothing.
 */
export function eventsWritten(db: Queryable | Tx): void {
  const wake = (): void => {
    for (const fn of writeListeners) fn()
  }
  if ('afterCommit' in db) db.afterCommit(wake)
  else wake()
}

/** Who wrote, for every event of a request: organization, actor, request id, Idempotency-Key. */
export interface EventOrigin {
  orgId: string
  actor: EventActor
  requestId: string | null
  idempotencyKey: string | null
}

/** What a write path knows of its request (a RequestContext is one). */
export interface WriteContext {
  auth: { orgId: string; keyId: string | null; userId: string | null }
  requestId?: string | undefined
  idempotencyKey?: string | undefined
}

export function originOf(ctx: WriteContext): EventOrigin {
  return {
    orgId: ctx.auth.orgId,
    actor: { api_key_id: callerKeyId(ctx.auth), user_id: ctx.auth.userId },
    requestId: ctx.requestId ?? null,
    idempotencyKey: ctx.idempotencyKey ?? null,
  }
}

/** Changes made by the operator (CLI, first start): no key, no user, no request. */
export function operatorOrigin(orgId: string): EventOrigin {
  return { orgId, actor: { api_key_id: null, user_id: null }, requestId: null, idempotencyKey: null }
}

/** One event to write. Scoping: the asset's (or a relationship source's) type and domain, the target's. */
export interface NewEvent {
  type: EventType
  subject: string
  object: Record<string, unknown>
  changes?: EventData['changes']
  asset_id?: string | null
  asset_type_key?: string | null
  access_domain_key?: string | null
  related_asset_id?: string | null
  related_asset_type_key?: string | null
  related_access_domain_key?: string | null
}

/**
 * Writes events in one statement. With `lookupEnds`, the scoping type and access domain of
 * `asset_id` and `related_asset_id` are read from `assets` in the same statement (relationship
 * events: the caller knows only the ends' ids); call it while those asset rows still exist.
 * Events get their ids (UUIDv7, increasing) in the order given, which is the order the relay
 * stamps them in.
 *
 * @example writeEvents(tx, originOf(ctx), [{ type: 'asset.restored', subject: `assets/${id}`, object: record,
 *          asset_id: id, asset_type_key: record.asset_type_key, access_domain_key: record.access_domain_key }])
 */
export async function writeEvents(tx: Queryable, origin: EventOrigin, events: readonly NewEvent[], options: { lookupEnds?: boolean } = {}): Promise<void> {
  if (events.length === 0) return
  const rows = events.map((e) => ({
    id: newId(),
    type: e.type,
    subject: e.subject,
    data: e.changes ? { object: e.object, changes: e.changes, actor: origin.actor } : { object: e.object, actor: origin.actor },
    asset_id: e.asset_id ?? null,
    asset_type_key: e.asset_type_key ?? null,
    access_domain_key: e.access_domain_key ?? null,
    related_asset_id: e.related_asset_id ?? null,
    related_asset_type_key: e.related_asset_type_key ?? null,
    related_access_domain_key: e.related_access_domain_key ?? null,
  }))
  // `data` read as json and cast once: json_to_recordset's own jsonb column parsed 10,000 events'
  // documents in 620 ms, the cast in 440 (PostgreSQL 15; decision 0011, documents travel as json).
  const recordset = `json_to_recordset($4::json) AS u(id uuid, type text, subject text, data json, asset_id uuid, asset_type_key text,
       access_domain_key text, related_asset_id uuid, related_asset_type_key text, related_access_domain_key text)`
  const select = options.lookupEnds
    ? `SELECT $1, u.id, u.type, u.subject, now(), $2, $3, u.data::jsonb, u.asset_id, s.asset_type_key, s.access_domain_key,
              u.related_asset_id, t.asset_type_key, t.access_domain_key, ${eventPositionSql(tx, 'u.id')}
       FROM ${ORG_ROW} CROSS JOIN ${recordset}
       LEFT JOIN assets s ON s.org_id = o.org_id AND s.id = u.asset_id
       LEFT JOIN assets t ON t.org_id = o.org_id AND t.id = u.related_asset_id`
    : `SELECT $1, u.id, u.type, u.subject, now(), $2, $3, u.data::jsonb, u.asset_id, u.asset_type_key, u.access_domain_key,
              u.related_asset_id, u.related_asset_type_key, u.related_access_domain_key, ${eventPositionSql(tx, 'u.id')}
       FROM ${recordset}`
  await tx.query(
    `INSERT INTO events (org_id, id, type, subject, time, request_id, idempotency_key, data, asset_id, asset_type_key, access_domain_key,
                         related_asset_id, related_asset_type_key, related_access_domain_key, sequence)
     ${select}
     ${inEventIdOrder(tx, 'u.id')}`,
    [origin.orgId, origin.requestId, origin.idempotencyKey, JSON.stringify(rows)],
  )
  eventsWritten(tx)
  // Every change of assets and relationships writes events: their remembered counts go with it.
  noteDataWrite(tx, origin.orgId)
}


/**
 * $3, $4, $5 of a statement that writes rows and their events together (assets/events.ts,
 * relationships/events.ts; $1 is the organization): request id, Idempotency-Key, actor (json).
 */
export function eventOriginParams(origin: EventOrigin): [string | null, string | null, string] {
  return [origin.requestId, origin.idempotencyKey, JSON.stringify(origin.actor)]
}

/**
 * A new event id per row, made in row id order, for a statement that writes rows and their
 * events together (the ids travel with the rows): events get their positions in id order, so a
 * bulk's events follow its rows' ids (UUIDv7, made in item order).
 */
export function eventIdsByRow(rows: readonly { id: string }[]): Map<string, string> {
  return new Map(inIdOrder(rows).map((row) => [row.id, newId()]))
}

/** Deep equality of JSON values (jsonb normalizes object key order; arrays keep theirs). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as unknown[]
    return a.length === bb.length && a.every((v, i) => sameJson(v, bb[i]))
  }
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
}
