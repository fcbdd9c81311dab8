import pg from 'pg'
import { v7 } from 'uuid'
import type { ServerItem } from './data.js'

/**
 * The raw-SQL yardsticks: the same rows written by one multi-row statement through `pg`, values
 * inlined as literals (10,000 rows × 9 columns would pass the 65,535 parameter limit). The SQL
 * text is built before the clock starts; only the round trip is timed.
 */
const lit = (value: string | null): string => (value === null ? 'NULL' : pg.escapeLiteral(value))

export function insertAssetsSql(orgId: string, items: readonly ServerItem[]): { sql: string; ids: string[] } {
  const ids = items.map(() => v7())
  const values = items.map((item, i) =>
    `(${lit(orgId)}, ${lit(ids[i]!)}, 'server', ${lit(item.name)}, ${lit(item.access_domain_key)}, ${lit(JSON.stringify(item.properties))}::jsonb, ${lit(item.properties.hostname as string)}, date_trunc('second', now()), date_trunc('second', now()))`)
  return {
    ids,
    sql: `INSERT INTO assets (org_id, id, asset_type_key, name, access_domain_key, properties, unique_value, created_at, updated_at) VALUES ${values.join(',\n')}`,
  }
}

/** Properties merge key by key (`||`), as PATCH does. */
export function updateAssetsSql(orgId: string, changes: readonly { id: string; properties: Record<string, unknown> }[]): string {
  const values = changes.map((c) => `(${lit(c.id)}::uuid, ${lit(JSON.stringify(c.properties))}::jsonb)`)
  return `UPDATE assets AS a SET properties = a.properties || v.p, updated_at = date_trunc('second', now())
    FROM (VALUES ${values.join(',\n')}) AS v(id, p) WHERE a.org_id = ${lit(orgId)} AND a.id = v.id`
}

export function insertRelationshipsSql(orgId: string, typeKey: string, pairs: readonly { source: string; target: string }[]): string {
  const values = pairs.map((p) => `(${lit(orgId)}, ${lit(v7())}, ${lit(typeKey)}, ${lit(p.source)}, ${lit(p.target)}, date_trunc('second', now()), date_trunc('second', now()))`)
  return `INSERT INTO relationships (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at) VALUES ${values.join(',\n')}`
}
