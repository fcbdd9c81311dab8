import type { Queryable } from '../store/db.js'
import { Params, selectPage, type CountOptions, type PageQuery, type PageRows } from '../store/sql.js'
import { ASSET_COLUMNS, type AssetRow } from './mapper.js'

export interface NewAssetRow {
  id: string
  asset_type_key: string
  name: string
  access_domain_key: string | null
  properties: Record<string, unknown>
  unique_value: string | null
}

/**
 * Inserts assets with one statement whatever their number: each column travels as one array
 * parameter through unnest (a multi-row VALUES list would need rows × columns parameters).
 * Timestamps are whole seconds, as the API shows them.
 */
export async function insertAssets(tx: Queryable, orgId: string, rows: readonly NewAssetRow[]): Promise<AssetRow[]> {
  const result = await tx.query<AssetRow>(
    `INSERT INTO assets AS a (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at)
     SELECT $1, u.id, u.asset_type_key, u.name, u.access_domain_key, u.properties, u.unique_value,
            date_trunc('second', now()), date_trunc('second', now())
     FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::text[])
       AS u(id, asset_type_key, name, access_domain_key, properties, unique_value)
     RETURNING ${ASSET_COLUMNS}`,
    [
      orgId,
      rows.map((r) => r.id),
      rows.map((r) => r.asset_type_key),
      rows.map((r) => r.name),
      rows.map((r) => r.access_domain_key),
      rows.map((r) => JSON.stringify(r.properties)),
      rows.map((r) => r.unique_value),
    ],
  )
  return result.rows
}

export interface AssetChange {
  id: string
  name: string
  access_domain_key: string | null
  properties: Record<string, unknown>
  unique_value: string | null
}

/** Writes new values for existing live assets, one statement for any number of them. */
export async function updateAssets(tx: Queryable, orgId: string, rows: readonly AssetChange[]): Promise<AssetRow[]> {
  const result = await tx.query<AssetRow>(
    `UPDATE assets AS a SET name = u.name, access_domain_key = u.access_domain_key, properties = u.properties,
            unique_value = u.unique_value, updated_at = date_trunc('second', now())
     FROM unnest($2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::text[])
       AS u(id, name, access_domain_key, properties, unique_value)
     WHERE a.org_id = $1 AND a.id = u.id AND a.archived_at IS NULL
     RETURNING ${ASSET_COLUMNS}`,
    [
      orgId,
      rows.map((r) => r.id),
      rows.map((r) => r.name),
      rows.map((r) => r.access_domain_key),
      rows.map((r) => JSON.stringify(r.properties)),
      rows.map((r) => r.unique_value),
    ],
  )
  return result.rows
}

export async function archiveAsset(tx: Queryable, orgId: string, id: string): Promise<boolean> {
  const result = await tx.query(
    `UPDATE assets SET archived_at = now() WHERE org_id = $1 AND id = $2 AND archived_at IS NULL`,
    [orgId, id],
  )
  return result.rowCount === 1
}

/** Reference to an asset as the API accepts it: a UUID or a composite key, already parsed. */
export type AssetKey = { id: string } | { asset_type_key: string; unique_value: string }

/** What resolving and access checks need of an asset: no properties, no timestamps. */
export interface AssetReference {
  id: string
  asset_type_key: string
  access_domain_key: string | null
  unique_value: string | null
}

/**
 * Finds live assets by UUID or by composite key in one statement. `lock` takes row locks in id
 * order, so concurrent writers over overlapping assets queue instead of deadlocking. The lock is
 * FOR NO KEY UPDATE, what an UPDATE of the row takes anyway: it queues other writers of the same
 * assets but not the FOR KEY SHARE locks of foreign-key checks, so relationships being created
 * to or from these assets meanwhile neither wait for the writer nor can deadlock with it. `columns: 'reference'` returns only AssetReference columns: for 10,000 keys that
 * skips reading, sending and parsing 10,000 property documents and 20,000 timestamps.
 */
export async function selectAssetsByKeys(db: Queryable, orgId: string, keys: readonly AssetKey[], lock?: boolean): Promise<AssetRow[]>
export async function selectAssetsByKeys(db: Queryable, orgId: string, keys: readonly AssetKey[], lock: boolean, columns: 'reference'): Promise<AssetReference[]>
export async function selectAssetsByKeys(
  db: Queryable,
  orgId: string,
  keys: readonly AssetKey[],
  lock = false,
  columns: 'record' | 'reference' = 'record',
): Promise<AssetRow[] | AssetReference[]> {
  const [only] = keys
  if (keys.length === 1 && only && 'id' in only && !lock) {
    // The hot path of GET /assets/{id}: one fixed text, run as a prepared statement.
    const result = await db.query<AssetRow & { unique_value: string | null }>(
      `SELECT ${ASSET_COLUMNS}, a.unique_value FROM assets a WHERE a.org_id = $1 AND a.id = $2 AND a.archived_at IS NULL`,
      [orgId, only.id],
      { prepare: 'kbis_asset_by_id' },
    )
    return result.rows
  }
  const ids = keys.flatMap((k) => ('id' in k ? [k.id] : []))
  const composite = keys.flatMap((k) => ('id' in k ? [] : [k]))
  const params = new Params([orgId])
  const conds: string[] = []
  if (ids.length > 0) conds.push(`a.id = ANY(${params.add(ids)}::uuid[])`)
  if (composite.length > 0) {
    conds.push(`(a.asset_type_key, a.unique_value) IN (SELECT * FROM unnest(${params.add(composite.map((c) => c.asset_type_key))}::text[], ${params.add(composite.map((c) => c.unique_value))}::text[]))`)
  }
  if (conds.length === 0) return []
  const selected = columns === 'reference' ? 'a.id, a.asset_type_key, a.access_domain_key' : ASSET_COLUMNS
  const result = await db.query<AssetRow & { unique_value: string | null }>(
    `SELECT ${selected}, a.unique_value FROM assets a
     WHERE a.org_id = $1 AND a.archived_at IS NULL AND (${conds.join(' OR ')})
     ORDER BY a.id${lock ? ' FOR NO KEY UPDATE' : ''}`,
    params.values,
  )
  return result.rows
}

/** One page of assets and its count, for GET /assets (deferred join on the asset's key). */
export async function selectAssetPage(db: Queryable, q: PageQuery, count: CountOptions = {}): Promise<PageRows<AssetRow>> {
  return selectPage<AssetRow>(db, { select: ASSET_COLUMNS, from: 'assets a', key: 'a' }, q, count)
}
