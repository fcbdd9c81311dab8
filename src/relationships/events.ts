import type { Queryable, Tx } from '../store/db.js'
import { ORG_ROW, inIdOrder, isoSecondSql } from '../store/sql.js'
import { eventPositionSql, eventsWritten, inEventIdOrder, writeEvents, type EventOrigin } from '../outbox/write.js'
import { toRelationshipRecord, type RelationshipRow } from './mapper.js'

/**
 * `relationship.deleted` (and `relationship.created` outside the insert); the ends' types and access domains (scoping)
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

/**
 * The INSERT of `relationship.created` events for the rows of a data-modifying INSERT (`rows`:
 * the record's columns) whose event ids are in `ids.event_id` (joined on `id`), in the same
 * statement; the ends' types and access domains (scoping) are read from `assets` by primary key.
 * Parameters: $1 org, $3 request id, $4 Idempotency-Key, $5 actor (json). `data.object` is the
 * record as toRelationshipRecord() builds it.
 */
export function relationshipCreatedEventsSql(tx: Tx, rows: string, ids: string): string {
  eventsWritten(tx)
  return `INSERT INTO events (org_id, id, type, subject, time, request_id, idempotency_key, data, asset_id, asset_type_key, access_domain_key,
                              related_asset_id, related_asset_type_key, related_access_domain_key, sequence)
       SELECT $1, ${ids}.event_id, 'relationship.created', 'relationships/' || ${rows}.id, now(), $3, $4,
              jsonb_build_object('object', jsonb_build_object('id', ${rows}.id, 'relationship_type_key', ${rows}.relationship_type_key,
                'source_asset_id', ${rows}.source_asset_id, 'target_asset_id', ${rows}.target_asset_id,
                'created_at', ${isoSecondSql(`${rows}.created_at`)}, 'updated_at', ${isoSecondSql(`${rows}.updated_at`)}), 'actor', $5::jsonb),
              ${rows}.source_asset_id, s.asset_type_key, s.access_domain_key, ${rows}.target_asset_id, t.asset_type_key, t.access_domain_key,
              ${eventPositionSql(tx, `${ids}.event_id`)}
       FROM ${ORG_ROW} CROSS JOIN ${rows} JOIN ${ids} ON ${ids}.id = ${rows}.id
       LEFT JOIN assets s ON s.org_id = o.org_id AND s.id = ${rows}.source_asset_id
       LEFT JOIN assets t ON t.org_id = o.org_id AND t.id = ${rows}.target_asset_id
       ${inEventIdOrder(tx, `${ids}.event_id`)}`
}
