import type { Queryable } from '../store/db.js'
import { Params } from '../store/sql.js'
import { fitsSql } from './fit.js'
import type { PropertySpec } from './types.js'

/**
 * Counts of the data a metamodel change would contradict. Each takes the org id first; keys are
 * always parameters. "Live" = not archived: archived assets are history, not checked against
 * property rules (but they still reference their asset type, and relationships their type).
 */

async function one(tx: Queryable, sql: string, params: readonly unknown[]): Promise<number> {
  const row = (await tx.query<{ n: number }>(sql, params)).rows[0]
  return Number(row?.n ?? 0)
}

const LIVE_OF_TYPE = 'FROM assets WHERE org_id = $1 AND asset_type_key = $2 AND archived_at IS NULL'
/** A value is present unless the key is absent or JSON null (PATCH with null clears a key). */
const PRESENT = "coalesce(jsonb_typeof(properties -> $3::text), 'null') <> 'null'"

export async function countLiveWithValue(tx: Queryable, orgId: string, type: string, property: string): Promise<number> {
  return one(tx, `SELECT count(*) AS n ${LIVE_OF_TYPE} AND ${PRESENT}`, [orgId, type, property])
}

/** Live assets without a value of `property`, an empty one (`""`, `[]`) counting as none, as for a required property (CONTRACT §2, §4). */
export async function countLiveWithoutValue(tx: Queryable, orgId: string, type: string, property: string): Promise<number> {
  return one(tx, `SELECT count(*) AS n ${LIVE_OF_TYPE} AND NOT (${PRESENT} AND properties -> $3::text NOT IN ('""'::jsonb, '[]'::jsonb))`, [orgId, type, property])
}

/** Live assets whose value of `p` does not fit `p` (the definition about to be stored). */
export async function countLiveNotFitting(tx: Queryable, orgId: string, type: string, p: PropertySpec): Promise<number> {
  const params = new Params([orgId, type, p.key])
  const fits = fitsSql('properties -> $3::text', p, params)
  return one(tx, `SELECT count(*) AS n ${LIVE_OF_TYPE} AND ${PRESENT} AND NOT (${fits})`, params.values)
}

/** Live assets sharing a value of `property` with another live asset, and how many values are shared. */
export async function countLiveDuplicates(tx: Queryable, orgId: string, type: string, property: string): Promise<{ assets: number; values: number }> {
  const row = (
    await tx.query<{ assets: number | null; shared: number }>(
      `SELECT sum(c) AS assets, count(*) AS shared FROM (
         SELECT count(*) AS c ${LIVE_OF_TYPE} AND ${PRESENT}
         GROUP BY properties -> $3::text HAVING count(*) > 1) d`,
      [orgId, type, property],
    )
  ).rows[0]
  return { assets: Number(row?.assets ?? 0), values: Number(row?.shared ?? 0) }
}

export async function countAssetsOfType(tx: Queryable, orgId: string, type: string): Promise<{ all: number; archived: number }> {
  const row = (
    await tx.query<{ total: number; archived: number }>(
      `SELECT count(*) AS total, count(*) FILTER (WHERE archived_at IS NOT NULL) AS archived
       FROM assets WHERE org_id = $1 AND asset_type_key = $2`,
      [orgId, type],
    )
  ).rows[0]
  return { all: Number(row?.total ?? 0), archived: Number(row?.archived ?? 0) }
}

export async function countLiveInDomain(tx: Queryable, orgId: string, domain: string): Promise<number> {
  return one(tx, 'SELECT count(*) AS n FROM assets WHERE org_id = $1 AND access_domain_key = $2 AND archived_at IS NULL', [orgId, domain])
}

export async function countRelationships(tx: Queryable, orgId: string, type: string): Promise<number> {
  return one(tx, 'SELECT count(*) AS n FROM relationships WHERE org_id = $1 AND relationship_type_key = $2', [orgId, type])
}

/** Relationships of `type` whose source (or target) asset is of a type outside `allowed`. */
export async function countRelationshipsOutside(
  tx: Queryable, orgId: string, type: string, end: 'source' | 'target', allowed: string[],
): Promise<number> {
  // The column comes from this fixed choice, never from input.
  const column = end === 'source' ? 'r.source_asset_id' : 'r.target_asset_id'
  return one(
    tx,
    `SELECT count(*) AS n FROM relationships r
     JOIN assets a ON a.org_id = r.org_id AND a.id = ${column}
     WHERE r.org_id = $1 AND r.relationship_type_key = $2 AND NOT (a.asset_type_key = ANY($3::text[]))`,
    [orgId, type, allowed],
  )
}

/** Copies each asset's unique_key value into `unique_value` (NULL when the type has none). */
export async function fillUniqueValues(tx: Queryable, orgId: string, type: string, property: string | null): Promise<number> {
  const res = await tx.query(
    `UPDATE assets SET unique_value = CASE WHEN $3::text IS NULL THEN NULL ELSE properties ->> $3::text END
     WHERE org_id = $1 AND asset_type_key = $2`,
    [orgId, type, property],
  )
  return res.rowCount
}
