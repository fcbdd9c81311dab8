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
  const read = readCompositeKey(ref, metamodel)
  return 'key' in read ? read.key : null
}

/**
 * Why `ref`, written as a composite key (three non-empty parts), can name no asset ever: its type
 * does not exist, or has no unique key of that name. Null when it names a key, or is not written
 * as one (a filter that says so names the shape instead).
 */
export function compositeKeyProblem(ref: string, metamodel: Metamodel): string | null {
  const read = readCompositeKey(ref, metamodel)
  return 'problem' in read ? read.problem : null
}

function readCompositeKey(ref: string, metamodel: Metamodel): { key: { asset_type_key: string; unique_value: string } } | { problem: string | null } {
  const parts = ref.split(':')
  if (parts.length !== 3 || parts.includes('')) return { problem: null }
  const [typeKey, propertyKey, value] = parts as [string, string, string]
  const type = metamodel.assetTypes.get(typeKey)
  if (!type) return { problem: `${ref} is no composite key: there is no asset type ${typeKey}` }
  if (type.unique_property_key !== propertyKey) {
    return { problem: `${ref} is no composite key: ${typeKey} ${type.unique_property_key === null ? 'has no unique key' : `has the unique key ${type.unique_property_key}, not ${propertyKey}`}` }
  }
  return { key: { asset_type_key: typeKey, unique_value: value } }
}
