/** Property types of CONTRACT §8. */
export const PROPERTY_TYPES = [
  'text', 'long_text', 'rich_text', 'url', 'number', 'integer', 'percentage', 'currency', 'score',
  'date', 'boolean', 'select', 'multi_select', 'unique_key',
] as const
export type PropertyType = (typeof PROPERTY_TYPES)[number]

/** How a property's values are stored and compared: decides operators, casts and sort order. */
export type ValueKind = 'text' | 'number' | 'date' | 'boolean' | 'multi'

export function valueKindOf(type: PropertyType): ValueKind {
  switch (type) {
    case 'number': case 'integer': case 'percentage': case 'currency': case 'score':
      return 'number'
    case 'date':
      return 'date'
    case 'boolean':
      return 'boolean'
    case 'multi_select':
      return 'multi'
    default:
      return 'text'
  }
}

export interface PropertyDefinition {
  key: string
  asset_type_key: string
  name: string
  description: string | null
  type: PropertyType
  required: boolean
  options: string[] | null
  currency: string | null
  min: number | null
  max: number | null
}

export interface AssetType {
  key: string
  name: string
  description: string | null
  unique_property_key: string | null
  properties: PropertyDefinition[]
}

export interface RelationshipType {
  key: string
  name: string
  description: string | null
  /** Empty list = any asset type. */
  source_asset_type_keys: string[]
  target_asset_type_keys: string[]
}

/** One organization's metamodel, loaded once and shared read-only by every request. */
export interface Metamodel {
  orgId: string
  version: number
  assetTypes: ReadonlyMap<string, AssetType>
  relationshipTypes: ReadonlyMap<string, RelationshipType>
  /** Every definition of a property key, across asset types (the same key may live on several). */
  propertiesByKey: ReadonlyMap<string, readonly PropertyDefinition[]>
}

export const KEY_PATTERN = /^[a-z][a-z0-9_]{0,62}$/
