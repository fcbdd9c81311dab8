import { isoSecond } from '../core/time.js'

export interface AssetRow {
  id: string
  asset_type_key: string
  name: string
  access_domain_key: string | null
  properties: Record<string, unknown>
  created_at: Date | string
  updated_at: Date | string
}

export interface AssetRecord {
  id: string
  asset_type_key: string
  name: string
  access_domain_key: string | null
  properties: Record<string, unknown>
  created_at: string
  updated_at: string
  relationships?: unknown[]
  relationships_meta?: unknown
}

/** The columns every asset read selects, in record order. */
export const ASSET_COLUMNS = 'a.id, a.asset_type_key, a.name, a.access_domain_key, a.properties, a.created_at, a.updated_at'

export function toAssetRecord(row: AssetRow): AssetRecord {
  return {
    id: row.id,
    asset_type_key: row.asset_type_key,
    name: row.name,
    access_domain_key: row.access_domain_key,
    properties: row.properties,
    created_at: isoSecond(row.created_at)!,
    updated_at: isoSecond(row.updated_at)!,
  }
}
