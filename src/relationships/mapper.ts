import { isoSecond } from '../core/time.js'
import { isoSecondSql } from '../store/sql.js'

/** A row of `relationships` as every read selects it. */
export interface RelationshipRow {
  id: string
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
  created_at: Date | string
  updated_at: Date | string
}

/** An expanded end (include=source_asset…) or related asset (include=relationships.related_asset…). */
export interface RelatedAssetRecord {
  id: string
  asset_type_key: string
  name: string
  created_at: string
  updated_at: string
  properties?: Record<string, unknown>
}

export interface RelationshipRecord {
  id: string
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
  created_at: string
  updated_at: string
  source_asset?: RelatedAssetRecord
  target_asset?: RelatedAssetRecord
}

/** The columns every relationship read selects (alias `r`), in record order. */
export const RELATIONSHIP_COLUMNS = 'r.id, r.relationship_type_key, r.source_asset_id, r.target_asset_id, r.created_at, r.updated_at'

/**
 * A relationship of `relationships r` as its record's JSON text (no includes), written by the
 * store in the record's order, timestamps to the second, as ASSET_RECORD_JSON (decision 0017).
 */
export const RELATIONSHIP_RECORD_JSON = `'{"id":"' || r.id || '","relationship_type_key":' || to_json(r.relationship_type_key)::text
  || ',"source_asset_id":"' || r.source_asset_id || '","target_asset_id":"' || r.target_asset_id
  || '","created_at":"' || ${isoSecondSql('r.created_at')} || '","updated_at":"' || ${isoSecondSql('r.updated_at')} || '"}'`

export function toRelationshipRecord(row: RelationshipRow): RelationshipRecord {
  return {
    id: row.id,
    relationship_type_key: row.relationship_type_key,
    source_asset_id: row.source_asset_id,
    target_asset_id: row.target_asset_id,
    created_at: isoSecond(row.created_at)!,
    updated_at: isoSecond(row.updated_at)!,
  }
}

export interface RelatedAssetRow {
  id: string
  asset_type_key: string
  name: string
  created_at: Date | string
  updated_at: Date | string
  properties?: Record<string, unknown> | null
}

/** The short asset form of includes; `properties` only when the include asks for them. */
export function toRelatedAsset(row: RelatedAssetRow, withProperties: boolean): RelatedAssetRecord {
  const record: RelatedAssetRecord = {
    id: row.id,
    asset_type_key: row.asset_type_key,
    name: row.name,
    created_at: isoSecond(row.created_at)!,
    updated_at: isoSecond(row.updated_at)!,
  }
  if (withProperties) record.properties = row.properties ?? {}
  return record
}
