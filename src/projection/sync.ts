import type { Db, Queryable } from '../store/db.js'
import { valueKindOf, type Metamodel, type PropertyType } from '../metamodel/types.js'
import { columnKey, columnName, projectionOf, projectionTable, type ProjectedColumn, type Projection } from './columns.js'
import { addColumnsSql, backfillColumnsSql, backfillSql, createTableSql, triggerStatements, uniqueKeyIndexSql } from './ddl.js'

/**
 * Keeps each organization's projection table in step with its metamodel: created on first need,
 * widened when a property key or value kind appears, backfilled from `assets` in the same
 * transaction. Columns are never dropped: a column is a pure function of the jsonb document (its
 * kind's JSON type), so one no longer defined is still correct, and a server that has not yet
 * reloaded the metamodel never names a column that is gone.
 */

// Exclusive here, shared in kbis_project_assets(): while a table is created or widened, writers
// of that organization wait, and the backfill sees every committed row (migration 0002).
const LOCK = "SELECT pg_advisory_xact_lock(hashtext('kbis_projection'), hashtext($1::text))"

interface Registry {
  columns: ProjectedColumn[]
}

async function readRegistry(db: Queryable, orgId: string): Promise<Registry | null> {
  const result = await db.query<Registry>('SELECT columns FROM asset_projections WHERE org_id = $1', [orgId])
  return result.rows[0] ?? null
}

interface Definition {
  key: string
  type: PropertyType
}

/** Every (key, kind) the organization's metamodel defines, in a stable order. */
function wantedColumns(definitions: readonly Definition[]): ProjectedColumn[] {
  const byKey = new Map<string, ProjectedColumn>()
  for (const { key, type } of definitions) {
    const kind = valueKindOf(type)
    byKey.set(columnKey(kind, key), { key, kind, column: columnName(kind, key) })
  }
  return [...byKey.values()].sort((a, b) => (a.column < b.column ? -1 : a.column > b.column ? 1 : 0))
}

/**
 * Creates or widens the projection of `orgId` to the metamodel in the store, inside the caller's
 * transaction (setup's apply calls it after a metamodel change; ensureProjection on first need).
 * Returns the projection as queries use it.
 */
export async function syncProjection(tx: Queryable, orgId: string): Promise<Projection> {
  await tx.query(LOCK, [orgId])
  const definitions = (await tx.query<Definition>('SELECT key, type FROM property_definitions WHERE org_id = $1', [orgId])).rows
  const table = projectionTable(orgId)
  const registry = await readRegistry(tx, orgId)
  const have = registry?.columns ?? []
  const known = new Set(have.map((c) => columnKey(c.kind, c.key)))
  const added = wantedColumns(definitions).filter((c) => !known.has(columnKey(c.kind, c.key)))
  const columns = [...have, ...added]
  if (registry === null) {
    for (const statement of createTableSql(table)) await tx.query(statement)
    if (added.length > 0) await tx.query(addColumnsSql(table, added))
    await tx.query(backfillSql(table, columns), [orgId])
  } else if (added.length > 0) {
    await tx.query(addColumnsSql(table, added))
    await tx.query(backfillColumnsSql(table, added), [orgId])
  }
  for (const def of definitions.filter((d) => d.type === 'unique_key')) {
    await tx.query(uniqueKeyIndexSql(table, columnName('text', def.key)))
  }
  if (registry === null || added.length > 0) await writeRegistry(tx, orgId, table, columns)
  return projectionOf(orgId, columns)
}

async function writeRegistry(tx: Queryable, orgId: string, table: string, columns: readonly ProjectedColumn[]): Promise<void> {
  const s = triggerStatements(table, columns)
  await tx.query(
    `INSERT INTO asset_projections (org_id, table_name, columns, insert_sql, upsert_sql, archive_sql, delete_sql)
     VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)
     ON CONFLICT (org_id) DO UPDATE SET table_name = EXCLUDED.table_name, columns = EXCLUDED.columns,
       insert_sql = EXCLUDED.insert_sql, upsert_sql = EXCLUDED.upsert_sql, archive_sql = EXCLUDED.archive_sql,
       delete_sql = EXCLUDED.delete_sql, updated_at = now()`,
    [orgId, table, JSON.stringify(columns), s.insert_sql, s.upsert_sql, s.archive_sql, s.delete_sql],
  )
}

/** Per store and process: the projection last found complete for an organization, by metamodel version. */
const verified = new WeakMap<Db, Map<string, { version: number; projection: Projection }>>()

/**
 * The projection a search or an aggregate of `metamodel`'s organization reads. Checked against
 * the registry once per metamodel version and process (one primary-key read); created or widened
 * in its own transaction only when something is missing (an organization made before this
 * storage existed, or one whose metamodel never went through setup).
 */
export async function ensureProjection(db: Db, metamodel: Metamodel): Promise<Projection> {
  const byOrg = verified.get(db) ?? new Map<string, { version: number; projection: Projection }>()
  verified.set(db, byOrg)
  const cached = byOrg.get(metamodel.orgId)
  if (cached !== undefined && cached.version === metamodel.version) return cached.projection
  const registry = await readRegistry(db, metamodel.orgId)
  const projection = registry !== null && coversMetamodel(registry.columns, metamodel)
    ? projectionOf(metamodel.orgId, registry.columns)
    : await db.transaction((tx) => syncProjection(tx, metamodel.orgId))
  byOrg.set(metamodel.orgId, { version: metamodel.version, projection })
  return projection
}

function coversMetamodel(columns: readonly ProjectedColumn[], metamodel: Metamodel): boolean {
  const have = new Set(columns.map((c) => columnKey(c.kind, c.key)))
  for (const [key, defs] of metamodel.propertiesByKey) {
    if (defs.some((def) => !have.has(columnKey(valueKindOf(def.type), key)))) return false
  }
  return true
}
