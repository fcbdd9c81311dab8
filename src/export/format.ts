import { stringify } from 'csv-stringify/sync'
import { toAssetRecord, type AssetRow } from '../assets/mapper.js'
import type { AssetType } from '../metamodel/types.js'

export function csvHeader(type: AssetType): string[] {
  return ['id', 'name', 'access_domain_key', 'created_at', 'updated_at', ...type.properties.map((p) => p.key)]
}

/** A property value as one CSV cell: a multi-select is its options joined by `|`; absent is empty. */
function cell(value: unknown): string {
  if (value === null || value === undefined) return ''
  if (Array.isArray(value)) return value.join('|')
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

/** CSV lines (RFC 4180 quoting by csv-stringify) of one batch, with the header before the first. */
export function csvLines(type: AssetType, rows: readonly AssetRow[], withHeader: boolean): string {
  const records = rows.map((row) => {
    const r = toAssetRecord(row)
    return [r.id, r.name, r.access_domain_key ?? '', r.created_at, r.updated_at, ...type.properties.map((p) => cell(r.properties[p.key]))]
  })
  return stringify(withHeader ? [csvHeader(type), ...records] : records)
}
