import type { Queryable } from '../store/db.js'
import { inIdOrder, writeEvents, type EventOrigin } from '../outbox/write.js'
import { toRelationshipRecord, type RelationshipRow } from './mapper.js'

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
