import { isUuid } from '../core/time.js'
import type { Metamodel } from './types.js'

/** Reference to an asset as the API accepts it: a UUID or a composite key, already parsed. */
export type AssetKey = { id: string } | { asset_type_key: string; unique_value: string }

/**
 * Parses how the API names an asset (CONTRACT §2): a UUID, or a composite key
 * `{asset_type_key}:{unique_property_key}:{value}`. Returns null when the text cannot name any
 * asset (unknown type, a type without that unique key): callers answer 404 as for a missing asset.
 */
export function parseAssetRef(ref: string, metamodel: Metamodel): AssetKey | null {
  if (isUuid(ref)) return { id: ref.toLowerCase() }
  const parts = ref.split(':')
  if (parts.length !== 3) return null
  const [typeKey, propertyKey, value] = parts as [string, string, string]
  const type = metamodel.assetTypes.get(typeKey)
  if (!type || type.unique_property_key === null || type.unique_property_key !== propertyKey || value === '') return null
  return { asset_type_key: typeKey, unique_value: value }
}
