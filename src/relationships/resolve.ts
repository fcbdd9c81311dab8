import type { RequestContext } from '../core/context.js'
import type { Queryable } from '../store/db.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import { parseAssetRef } from '../assets/refs.js'
import { selectAssetsByKeys, type AssetKey, type AssetReference } from '../assets/sql.js'
import type { RelationshipType } from '../metamodel/types.js'

/**
 * Resolves asset references (UUIDs or composite keys) with ONE statement for the whole batch.
 * The answer maps each reference text to its live asset, or to undefined when the reference
 * names nothing this key can see: unknown, archived and hidden assets look the same (CONTRACT §1,
 * never reveal existence).
 */
export async function resolveAssetRefs(ctx: RequestContext, db: Queryable, refs: Iterable<string>): Promise<Map<string, AssetReference | undefined>> {
  const parsed = new Map<string, AssetKey | null>()
  for (const ref of refs) if (!parsed.has(ref)) parsed.set(ref, parseAssetRef(ref, ctx.metamodel))
  const keys = [...parsed.values()].filter((k): k is AssetKey => k !== null)
  // Only what ends are checked on (id, type, domain, unique_value): a bulk request resolves up to
  // 20,000 references, and whole documents would cost more to ship and parse than the lookup.
  const rows = keys.length === 0 ? [] : await selectAssetsByKeys(db, ctx.auth.orgId, keys, false, 'reference')
  // Maps, not a search per reference: a bulk request resolves up to 10,000 of them.
  const byId = new Map(rows.map((row) => [row.id, row]))
  const byComposite = new Map(rows.map((row) => [compositeKey(row.asset_type_key, row.unique_value), row]))
  const resolved = new Map<string, AssetReference | undefined>()
  for (const [ref, key] of parsed) {
    const row = key === null ? undefined : 'id' in key ? byId.get(key.id) : byComposite.get(compositeKey(key.asset_type_key, key.unique_value))
    resolved.set(ref, row !== undefined && hasLevel(ctx.auth, row, 'view') ? row : undefined)
  }
  return resolved
}

function compositeKey(typeKey: string, value: string | null | undefined): string {
  return `${typeKey}\u0000${value ?? ''}`
}

export type End = 'source' | 'target'

/** Empty list = any asset type (CONTRACT §8). */
export function endAllows(type: RelationshipType, end: End, assetTypeKey: string): boolean {
  const keys = end === 'source' ? type.source_asset_type_keys : type.target_asset_type_keys
  return keys.length === 0 || keys.includes(assetTypeKey)
}

export function endNotAllowed(type: RelationshipType, end: End, assetTypeKey: string): string {
  const keys = end === 'source' ? type.source_asset_type_keys : type.target_asset_type_keys
  return `relationship type ${type.key} does not allow ${end} assets of type ${assetTypeKey}; it allows ${keys.join(', ')}`
}

export function cannotEdit(asset: AssetReference): string {
  const domain = describeDomain(asset.access_domain_key)
  return `the key's roles do not allow to change relationships of ${asset.asset_type_key} assets in ${domain} (edit on the source asset is needed)`
}
