import type { Queryable } from '../store/db.js'
import { Params, selectPage, type CountOptions, type PageQuery, type PageRows } from '../store/sql.js'
import { RELATIONSHIP_COLUMNS, type RelatedAssetRow, type RelationshipRow } from './mapper.js'

/** A validated relationship ready to be written (see prepare.ts). */
export interface NewRelationshipRow {
  id: string
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
}

/**
 * The order in which a multi-row INSERT (alias `u`, with an ordinality column `n`) writes
 * relationships: the order of `relationships_unique`, then the item's position. An INSERT that
 * meets a row of a concurrent, uncommitted transaction on that index waits for it; two requests
 * writing overlapping relationships in opposite orders would wait for each other (a deadlock).
 * In one global order the later request simply waits, then finds the duplicates. Among equal
 * rows of one request, the first item's is written and the later ones are the duplicates.
 */
export const RELATIONSHIP_INSERT_ORDER = 'ORDER BY u.source_asset_id, u.relationship_type_key COLLATE "C", u.target_asset_id, u.n'

/**
 * Inserts relationships with one statement whatever their number: each column travels as one
 * array parameter through unnest (10,000 rows × 4 columns would pass PostgreSQL's 65,535
 * parameter limit as a VALUES list). Without `ignoreDuplicates`, an existing (type, source,
 * target) raises 23505 on `relationships_unique`, which pg-errors.ts maps to 409
 * duplicate_relationship; with it, existing ones are kept as they are (id and created_at
 * unchanged) and only new rows are returned.
 */
export async function insertRelationships(
  tx: Queryable,
  orgId: string,
  rows: readonly NewRelationshipRow[],
  options: { ignoreDuplicates?: boolean } = {},
): Promise<RelationshipRow[]> {
  if (rows.length === 0) return []
  const result = await tx.query<RelationshipRow>(
    `INSERT INTO relationships AS r (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at)
     SELECT $1, u.id, u.relationship_type_key, u.source_asset_id, u.target_asset_id,
            date_trunc('second', now()), date_trunc('second', now())
     FROM unnest($2::uuid[], $3::text[], $4::uuid[], $5::uuid[]) WITH ORDINALITY
       AS u(id, relationship_type_key, source_asset_id, target_asset_id, n)
     ${RELATIONSHIP_INSERT_ORDER}
     ${options.ignoreDuplicates ? 'ON CONFLICT ON CONSTRAINT relationships_unique DO NOTHING' : ''}
     RETURNING ${RELATIONSHIP_COLUMNS}`,
    [
      orgId,
      rows.map((r) => r.id),
      rows.map((r) => r.relationship_type_key),
      rows.map((r) => r.source_asset_id),
      rows.map((r) => r.target_asset_id),
    ],
  )
  return result.rows
}

/** Rows of `relationships r` matching `where` (which carries org, visibility and filters). */
export async function selectRelationships(db: Queryable, where: string, params: Params, lock = false): Promise<RelationshipRow[]> {
  const result = await db.query<RelationshipRow>(
    `SELECT ${RELATIONSHIP_COLUMNS} FROM relationships r WHERE ${where}${lock ? ' FOR UPDATE OF r' : ''}`,
    params.values,
  )
  return result.rows
}

/** One page of relationships and the total, for GET /relationships and relationship search. */
export async function selectRelationshipPage(db: Queryable, q: PageQuery, count: CountOptions = {}): Promise<PageRows<RelationshipRow>> {
  return selectPage<RelationshipRow>(db, { select: RELATIONSHIP_COLUMNS, from: 'relationships r', key: 'r' }, q, count)
}

export async function deleteRelationshipById(tx: Queryable, orgId: string, id: string): Promise<boolean> {
  const result = await tx.query('DELETE FROM relationships WHERE org_id = $1 AND id = $2', [orgId, id])
  return result.rowCount === 1
}

/**
 * The expanded ends of a page of relationships, one statement for the whole page. The callers
 * only ask for ends of relationships already found visible, so no scope is repeated here.
 */
export async function selectRelatedAssets(db: Queryable, orgId: string, ids: readonly string[], withProperties: boolean): Promise<RelatedAssetRow[]> {
  if (ids.length === 0) return []
  const result = await db.query<RelatedAssetRow>(
    `SELECT a.id, a.asset_type_key, a.name, a.created_at, a.updated_at${withProperties ? ', a.properties' : ''}
     FROM assets a WHERE a.org_id = $1 AND a.id = ANY($2::uuid[])`,
    [orgId, [...new Set(ids)]],
  )
  return result.rows
}
