import type { AuthContext } from '../core/auth/context.js'
import type { Queryable } from '../store/db.js'
import { Params } from '../store/sql.js'
import { scopeCondition } from '../access/scope.js'

export type Direction = 'outgoing' | 'incoming'

/** One submitted (asset, direction, relationship type) pair. */
export interface PairKey {
  asset_id: string
  direction: Direction
  relationship_type_key: string
}

/** A related asset submitted in a pair: its relationship stays (or is created). */
export interface KeptRelated extends PairKey {
  related_id: string
}

export interface RemovedRelationship extends KeptRelated {
  /** The relationship to delete. */
  id: string
  /** Whether the key may edit the relationship's source asset (deleting needs it). */
  editable: boolean
}

/**
 * Finds, in ONE statement for every pair of every asset, the relationships of the submitted
 * pairs whose related asset was not submitted: those the sync deletes (with
 * `deleteRelationships`, the one delete of relationship rows). Only relationships whose other end is live and
 * visible to the key are touched: what the key cannot see is never deleted (and relationships to
 * archived assets are kept for the console). Relationships that stay are not deleted and
 * re-created, so their id and created_at survive a sync.
 *
 * Plan shape, on purpose (see selectIncludedRelationships): pairs → index lookups of their
 * relationships (relationships_unique for outgoing, relationships_target for incoming) →
 * primary-key lookups of the other ends, each a LATERAL subquery fenced with `OFFSET 0` so that
 * the plan stays linear without statistics. `NOT IN (unnest …)` is planned as one hashed
 * subplan, so the submitted set is hashed once instead of scanned per relationship.
 * Each row says whether the key may edit its source: the caller refuses the whole write (and the
 * transaction rolls back) when it may not.
 */
export async function selectReplacedRelationships(
  tx: Queryable,
  auth: AuthContext,
  pairs: readonly PairKey[],
  kept: readonly KeptRelated[],
): Promise<RemovedRelationship[]> {
  if (pairs.length === 0) return []
  const params = new Params([auth.orgId])
  const p = [pairs.map((x) => x.asset_id), pairs.map((x) => x.direction), pairs.map((x) => x.relationship_type_key)].map((v) => params.add(v))
  const k = [kept.map((x) => x.asset_id), kept.map((x) => x.direction), kept.map((x) => x.relationship_type_key), kept.map((x) => x.related_id)]
    .map((v) => params.add(v))
  const visible = scopeCondition(auth, 'o', 'view', params)
  const editable = scopeCondition(auth, 'o', 'edit', params)
  const result = await tx.query<RemovedRelationship>(
    `SELECT c.id, p.asset_id, p.direction, p.relationship_type_key, c.related_id, (p.direction = 'outgoing' OR ${editable}) AS editable
       FROM unnest(${p[0]}::uuid[], ${p[1]}::text[], ${p[2]}::text[]) AS p(asset_id, direction, relationship_type_key)
       CROSS JOIN LATERAL (
         SELECT r.id, r.target_asset_id AS related_id FROM relationships r
         WHERE p.direction = 'outgoing' AND r.org_id = $1 AND r.source_asset_id = p.asset_id AND r.relationship_type_key = p.relationship_type_key
         UNION ALL
         SELECT r.id, r.source_asset_id FROM relationships r
         WHERE p.direction = 'incoming' AND r.org_id = $1 AND r.target_asset_id = p.asset_id AND r.relationship_type_key = p.relationship_type_key
         OFFSET 0
       ) c
       CROSS JOIN LATERAL (SELECT o.* FROM assets o WHERE o.org_id = $1 AND o.id = c.related_id OFFSET 0) o
       WHERE o.archived_at IS NULL AND ${visible}
         AND (p.asset_id, p.direction, p.relationship_type_key, c.related_id) NOT IN (
           SELECT * FROM unnest(${k[0]}::uuid[], ${k[1]}::text[], ${k[2]}::text[], ${k[3]}::uuid[]))`,
    params.values,
  )
  return result.rows
}
