import type { Queryable } from '../store/db.js'
import { newId } from '../core/time.js'
import { eventsWritten, inIdOrder, sameJson, writeEvents, type EventOrigin, type NewEvent } from '../outbox/write.js'
import type { EventData, EventType } from '../outbox/cloud-event.js'
import { toAssetRecord, type AssetRow } from './mapper.js'
import type { AssetUpdate } from './sql.js'

/* The events of asset writes (CONTRACT §13), written through the outbox (src/outbox/write.ts). */

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
