import pg from 'pg'
import { v7 } from 'uuid'
import type { ServerItem } from './data.js'
import type { RawStore, Statement } from './raw-store.js'

/**
 * The physical limit (issue 15): lean raw tables holding only what the workloads need, created
 * by the bench beside the service's tables in the same store and the same run.
 *
 * bench_lean_assets(id, org_id, type, name, properties jsonb): no archive flag, no timestamps, no
 * access domain, no typed projection, no trigger, no foreign key, and one index per query:
 *   - (org_id, name, id) for list page 1, page N (OFFSET) and the search sorted by name;
 *   - PRIMARY KEY (org_id, id) for the bulk update by id.
 * bench_lean_relationships(org_id, id, type, source_id, target_id): one index, the uniqueness of
 * (org_id, source_id, type, target_id) that any relationship store needs.
 * Aggregates read jsonb (`properties->>'k'`) with no index: "raw SQL over jsonb".
 */
export const LEAN_COLUMNS = ['id', 'org_id', 'type', 'name', 'properties']

export async function createLeanTables(store: RawStore, orgId: string): Promise<void> {
  await store.query('DROP TABLE IF EXISTS bench_lean_assets, bench_lean_relationships')
  await store.query(`CREATE TABLE bench_lean_assets (id uuid NOT NULL, org_id uuid NOT NULL, type text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL, properties jsonb NOT NULL)`)
  await store.query(`CREATE TABLE bench_lean_relationships (org_id uuid NOT NULL, id uuid NOT NULL, type text COLLATE "C" NOT NULL,
    source_id uuid NOT NULL, target_id uuid NOT NULL)`)
  // The same live servers the service holds, loaded before the indexes are built (as a bulk load would).
  await store.query(`INSERT INTO bench_lean_assets (id, org_id, type, name, properties)
    SELECT id, org_id, asset_type_key, name, properties FROM assets WHERE org_id = $1 AND archived_at IS NULL`, [orgId])
  await store.query('ALTER TABLE bench_lean_assets ADD PRIMARY KEY (org_id, id)')
  await store.query('CREATE INDEX bench_lean_assets_name ON bench_lean_assets (org_id, name, id)')
  await store.query('CREATE UNIQUE INDEX bench_lean_relationships_unique ON bench_lean_relationships (org_id, source_id, type, target_id)')
  await store.query('VACUUM ANALYZE bench_lean_assets')
  await store.query('VACUUM ANALYZE bench_lean_relationships')
}

export async function dropLeanTables(store: RawStore): Promise<void> {
  await store.query('DROP TABLE IF EXISTS bench_lean_assets, bench_lean_relationships')
}

const SELECT = 'SELECT id, type, name, properties FROM bench_lean_assets'

/** The raw reads: the page query alone, never a count. */
export function leanReads(orgId: string, deepPage: number): Record<'list' | 'deep' | 'search' | 'groupBy' | 'distinct', Statement> {
  return {
    list: { sql: `${SELECT} WHERE org_id = $1 ORDER BY name, id LIMIT 100`, params: [orgId] },
    deep: { sql: `${SELECT} WHERE org_id = $1 ORDER BY name, id LIMIT 100 OFFSET $2`, params: [orgId, (deepPage - 1) * 100] },
    // The nested filter of bench/lib/data.ts SEARCH_FILTER, over jsonb, walking the name index.
    search: {
      sql: `${SELECT} WHERE org_id = $1 AND ((properties->>'environment' = 'prod' AND (properties->>'cpu_count')::numeric >= 16)
        OR (properties->'tags' ? 'pci' AND name ILIKE 'db-%')) ORDER BY name, id LIMIT 50`,
      params: [orgId],
    },
    groupBy: {
      sql: `SELECT properties->>'environment' AS environment, count(*), avg((properties->>'memory_gb')::numeric)
        FROM bench_lean_assets WHERE org_id = $1 GROUP BY 1 ORDER BY 1`,
      params: [orgId],
    },
    distinct: { sql: `SELECT count(DISTINCT properties->>'owner') FROM bench_lean_assets WHERE org_id = $1`, params: [orgId] },
  }
}

const lit = (value: string): string => pg.escapeLiteral(value)

/** One multi-row INSERT … VALUES of `items` (literals: 10,000 × 5 values would pass the parameter limit). */
export function insertLeanSql(orgId: string, items: readonly ServerItem[]): { sql: string; ids: string[] } {
  const ids = items.map(() => v7())
  const values = items.map((item, i) => `(${lit(ids[i]!)}, ${lit(orgId)}, 'server', ${lit(item.name)}, ${lit(JSON.stringify(item.properties))}::jsonb)`)
  return { ids, sql: `INSERT INTO bench_lean_assets (id, org_id, type, name, properties) VALUES ${values.join(',\n')}` }
}

/** The same rows as COPY text format (tab-separated; jsonb's backslashes doubled). */
export function leanTsv(orgId: string, items: readonly ServerItem[]): string {
  return items.map((item) => [v7(), orgId, 'server', item.name, JSON.stringify(item.properties).replaceAll('\\', '\\\\')].join('\t')).join('\n') + '\n'
}

export function updateLeanSql(orgId: string, changes: readonly { id: string; properties: Record<string, unknown> }[]): string {
  const values = changes.map((c) => `(${lit(c.id)}::uuid, ${lit(JSON.stringify(c.properties))}::jsonb)`)
  return `UPDATE bench_lean_assets AS a SET properties = a.properties || v.p
    FROM (VALUES ${values.join(',\n')}) AS v(id, p) WHERE a.org_id = ${lit(orgId)} AND a.id = v.id`
}

export function insertLeanRelationshipsSql(orgId: string, pairs: readonly { source: string; target: string }[]): string {
  const values = pairs.map((p) => `(${lit(orgId)}, ${lit(v7())}, 'runs_on', ${lit(p.source)}, ${lit(p.target)})`)
  return `INSERT INTO bench_lean_relationships (org_id, id, type, source_id, target_id) VALUES ${values.join(',\n')}`
}
