import type { Queryable } from '../store/db.js'
import { Params } from '../store/sql.js'
import type { AssetKey } from '../metamodel/refs.js'

/**
 * What resolving and access checks need of an asset: no properties, no timestamps. This folder
 * is the neutral ground where assets/ and relationships/ both look assets up by how the API
 * names them, without importing each other.
 */
export interface AssetReference {
  id: string
  asset_type_key: string
  access_domain_key: string | null
  unique_value: string | null
}

/**
 * The condition matching live asset rows `a` named by `keys` (UUIDs and composite keys, both
 * passed as arrays), or null when no key names anything.
 */
export function keysCondition(keys: readonly AssetKey[], params: Params): string | null {
  const ids = keys.flatMap((k) => ('id' in k ? [k.id] : []))
  const composite = keys.flatMap((k) => ('id' in k ? [] : [k]))
  const conds: string[] = []
  if (ids.length > 0) conds.push(`a.id = ANY(${params.add(ids)}::uuid[])`)
  if (composite.length > 0) {
    conds.push(`(a.asset_type_key, a.unique_value) IN (SELECT * FROM unnest(${params.add(composite.map((c) => c.asset_type_key))}::text[], ${params.add(composite.map((c) => c.unique_value))}::text[]))`)
  }
  return conds.length === 0 ? null : `(${conds.join(' OR ')})`
}

/**
 * Finds live assets by UUID or by composite key in one statement, reading only AssetReference
 * columns: for 10,000 keys that skips reading, sending and parsing 10,000 property documents and
 * 20,000 timestamps. `lock` takes row locks in id order, so concurrent writers over overlapping
 * assets queue instead of deadlocking. The lock is FOR NO KEY UPDATE, what an UPDATE of the row
 * takes anyway: it queues other writers of the same assets but not the FOR KEY SHARE locks of
 * foreign-key checks, so relationships being created to or from these assets meanwhile neither
 * wait for the writer nor can deadlock with it. Without a lock the rows come in no particular
 * order (sorting 10,000 of them by id was a third of an upsert's look-up). `more`: columns of `a`
 * to answer besides (the upsert's look-up, assets/sql.ts selectReplaced).
 */
export async function selectAssetRefs<R extends AssetReference = AssetReference>(db: Queryable, orgId: string, keys: readonly AssetKey[], lock = false, more = ''): Promise<R[]> {
  const params = new Params([orgId])
  const cond = keysCondition(keys, params)
  if (cond === null) return []
  const result = await db.query<R>(
    `SELECT a.id, a.asset_type_key, a.access_domain_key, a.unique_value${more && `, ${more}`} FROM assets a
     WHERE a.org_id = $1 AND a.archived_at IS NULL AND ${cond}${lock ? ' ORDER BY a.id FOR NO KEY UPDATE' : ''}`,
    params.values,
  )
  return result.rows
}
