import type { Queryable } from '../store/db.js'
import { noteDataWrite } from '../counts/cache.js'
import { ORG_ROW } from '../store/sql.js'
import { newId } from '../core/time.js'
import { toAssetRecord, type AssetRow } from '../assets/mapper.js'
import type { AssetUpdate } from '../assets/sql.js'
import type { RelationshipRow } from '../relationships/mapper.js'
import { toRelationshipRecord } from '../relationships/mapper.js'
import type { ApiKeyRow } from '../keys/sql.js'
import { toApiKeyRecord } from '../keys/mapper.js'
import type { EventActor, EventData, EventType } from './cloud-event.js'

/*
 * The outbox writers (CONTRACT §13; docs/events.md, "Writing events"). Every write path calls
 * them in the transaction of its change, so an event exists exactly when its change committed.
 * Each call is ONE statement whatever the number of events (a bulk of 10,000 → one INSERT), with
 * the events as one json parameter. `sequence` stays NULL: the relay stamps it after commit.
 */

/** Relays of this process, woken when this process writes events (see relay.ts). */
const writeListeners = new Set<() => void>()

/** Calls `fn` soon after this process writes events (its transaction may still be open). */
export function onEventsWritten(fn: () => void): () => void {
  writeListeners.add(fn)
  return () => writeListeners.delete(fn)
}

function eventsWritten(): void {
  for (const fn of writeListeners) fn()
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
    // A console user acts without a key (core/auth/user.ts: keyId '').
    actor: { api_key_id: ctx.auth.keyId || null, user_id: ctx.auth.userId },
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
  const recordset = `json_to_recordset($4::json) AS u(id uuid, type text, subject text, data jsonb, asset_id uuid, asset_type_key text,
       access_domain_key text, related_asset_id uuid, related_asset_type_key text, related_access_domain_key text)`
  const select = options.lookupEnds
    ? `SELECT $1, u.id, u.type, u.subject, now(), $2, $3, u.data, u.asset_id, s.asset_type_key, s.access_domain_key,
              u.related_asset_id, t.asset_type_key, t.access_domain_key
       FROM ${ORG_ROW} CROSS JOIN ${recordset}
       LEFT JOIN assets s ON s.org_id = o.org_id AND s.id = u.asset_id
       LEFT JOIN assets t ON t.org_id = o.org_id AND t.id = u.related_asset_id`
    : `SELECT $1, u.id, u.type, u.subject, now(), $2, $3, u.data, u.asset_id, u.asset_type_key, u.access_domain_key,
              u.related_asset_id, u.related_asset_type_key, u.related_access_domain_key
       FROM ${recordset}`
  await tx.query(
    `INSERT INTO events (org_id, id, type, subject, time, request_id, idempotency_key, data, asset_id, asset_type_key, access_domain_key,
                         related_asset_id, related_asset_type_key, related_access_domain_key)
     ${select}`,
    [origin.orgId, origin.requestId, origin.idempotencyKey, JSON.stringify(rows)],
  )
  eventsWritten()
  // Every change of assets and relationships writes events: their remembered counts go with it.
  noteDataWrite(tx, origin.orgId)
}

/** $3, $4, $5 of {@link assetCreatedEventsSql}: request id, Idempotency-Key, actor. */
export function eventOriginParams(origin: EventOrigin): [string | null, string | null, string] {
  return [origin.requestId, origin.idempotencyKey, JSON.stringify(origin.actor)]
}

/** A new event id per row, made in row id order (UUIDv7 ids of one request follow its items). */
export function createdEventIds(rows: readonly { id: string }[]): Map<string, string> {
  return new Map(inIdOrder(rows).map((row) => [row.id, newId()]))
}

/** `2026-01-31T09:15:00Z` in SQL, as isoSecond() writes it. */
const isoSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`

/**
 * The INSERT of `asset.created` events for the rows of a data-modifying CTE (`rows`: the columns
 * of an asset record) whose event ids are in `ids.event_id` (joined on `id`), for one statement
 * that writes assets and events together. Parameters: $1 org, $3 request id, $4 Idempotency-Key,
 * $5 actor (json). `data.object` is the record as toAssetRecord() builds it.
 */
export function assetCreatedEventsSql(rows: string, ids: string): string {
  eventsWritten()
  return `INSERT INTO events (org_id, id, type, subject, time, request_id, idempotency_key, data, asset_id, asset_type_key, access_domain_key)
       SELECT $1, ${ids}.event_id, 'asset.created', 'assets/' || ${rows}.id, now(), $3, $4,
              jsonb_build_object('object', jsonb_build_object('id', ${rows}.id, 'asset_type_key', ${rows}.asset_type_key, 'name', ${rows}.name,
                'access_domain_key', ${rows}.access_domain_key, 'properties', ${rows}.properties,
                'created_at', ${isoSql(`${rows}.created_at`)}, 'updated_at', ${isoSql(`${rows}.updated_at`)}), 'actor', $5::jsonb),
              ${rows}.id, ${rows}.asset_type_key, ${rows}.access_domain_key
       FROM ${rows} JOIN ${ids} ON ${ids}.id = ${rows}.id`
}

function assetEvent(type: EventType, row: AssetRow, changes?: EventData['changes']): NewEvent {
  return {
    type,
    subject: `assets/${row.id}`,
    object: toAssetRecord(row) as unknown as Record<string, unknown>,
    ...(changes ? { changes } : {}),
    asset_id: row.id,
    asset_type_key: row.asset_type_key,
    access_domain_key: row.access_domain_key,
  }
}

/** By asset id: ids are UUIDv7 made in item order, so a bulk's events follow its items. */
function inIdOrder<T extends { id: string }>(rows: readonly T[]): T[] {
  return [...rows].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/**
 * `asset.created`, `asset.archived`, `asset.restored`, `asset.deleted` for asset rows (the
 * record as GET returns it; archived and deleted: the last state). The console's restore and
 * permanent deletion call this with their rows.
 */
export async function writeAssetEvents(tx: Queryable, origin: EventOrigin, type: 'asset.created' | 'asset.archived' | 'asset.restored' | 'asset.deleted', rows: readonly AssetRow[]): Promise<void> {
  await writeEvents(tx, origin, inIdOrder(rows).map((row) => assetEvent(type, row)))
}

/** `asset.updated` for each update that changed something; `changes` lists exactly what changed. */
export async function writeAssetUpdateEvents(tx: Queryable, origin: EventOrigin, updates: readonly AssetUpdate[]): Promise<void> {
  const events: NewEvent[] = []
  for (const { before, after } of [...updates].sort((a, b) => (a.after.id < b.after.id ? -1 : 1))) {
    const changes = assetChanges(before, after)
    if (changes) events.push(assetEvent('asset.updated', after, changes))
  }
  await writeEvents(tx, origin, events)
}

/** The fields that differ: `name`, `access_domain_key`, `properties.<key>` (a cleared key: `to` null); null when none. */
export function assetChanges(before: AssetRow, after: AssetRow): EventData['changes'] | null {
  const changes: NonNullable<EventData['changes']> = {}
  if (before.name !== after.name) changes.name = { from: before.name, to: after.name }
  if (before.access_domain_key !== after.access_domain_key) changes.access_domain_key = { from: before.access_domain_key, to: after.access_domain_key }
  const keys = new Set([...Object.keys(before.properties), ...Object.keys(after.properties)])
  for (const key of [...keys].sort()) {
    const from = before.properties[key] ?? null
    const to = after.properties[key] ?? null
    if (!sameJson(from, to)) changes[`properties.${key}`] = { from, to }
  }
  return Object.keys(changes).length === 0 ? null : changes
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

/**
 * `relationship.created` / `relationship.deleted`; the ends' types and access domains (scoping)
 * are read in the same statement, so call it while both end assets exist (before a permanent
 * deletion of an end).
 */
export async function writeRelationshipEvents(tx: Queryable, origin: EventOrigin, type: 'relationship.created' | 'relationship.deleted', rows: readonly RelationshipRow[]): Promise<void> {
  await writeEvents(tx, origin, inIdOrder(rows).map((row) => ({
    type,
    subject: `relationships/${row.id}`,
    object: toRelationshipRecord(row) as unknown as Record<string, unknown>,
    asset_id: row.source_asset_id,
    related_asset_id: row.target_asset_id,
  })), { lookupEnds: true })
}

const API_KEY_FIELDS = ['name', 'description', 'permission_type', 'role_keys', 'owner_user_id'] as const

/** `api_key.*` of one key: the record without secret; `updated` only when a record field changed. */
export async function writeApiKeyEvent(tx: Queryable, origin: EventOrigin, type: 'api_key.created' | 'api_key.updated' | 'api_key.deleted', row: ApiKeyRow, before?: ApiKeyRow): Promise<void> {
  let changes: EventData['changes']
  if (type === 'api_key.updated') {
    if (!before) throw new Error('api_key.updated needs the key as it was')
    changes = {}
    for (const field of API_KEY_FIELDS) {
      if (!sameJson(before[field], row[field])) changes[field] = { from: before[field], to: row[field] }
    }
    if (Object.keys(changes).length === 0) return
  }
  await writeEvents(tx, origin, [{
    type,
    subject: `api-keys/${row.id}`,
    object: toApiKeyRecord(row) as unknown as Record<string, unknown>,
    ...(changes ? { changes } : {}),
  }])
}
