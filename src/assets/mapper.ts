import { isoSecond } from '../core/time.js'
import { isoSecondSql } from '../store/sql.js'

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

/**
 * An asset of `assets a` as its record's JSON text (CONTRACT §2, no includes), written by the
 * store: the members in the record's order, strings escaped by `to_json` as JSON.stringify escapes
 * them, the properties as jsonb writes them (`{"a": 1}`, a space after each colon and comma),
 * timestamps to the second. Pages and exports pass the text on: parsing every row and writing it
 * again was most of their CPU time (decision 0017).
 */
export const ASSET_RECORD_JSON = `'{"id":"' || a.id || '","asset_type_key":' || to_json(a.asset_type_key)::text
  || ',"name":' || to_json(a.name)::text
  || ',"access_domain_key":' || coalesce(to_json(a.access_domain_key)::text, 'null')
  || ',"properties":' || a.properties::text
  || ',"created_at":"' || ${isoSecondSql('a.created_at')} || '","updated_at":"' || ${isoSecondSql('a.updated_at')} || '"}'`

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
