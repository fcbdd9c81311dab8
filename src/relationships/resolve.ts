import { describeDomain } from '../access/scope.js'
import type { AssetReference } from '../refs/sql.js'
import type { RelationshipType } from '../metamodel/types.js'

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
