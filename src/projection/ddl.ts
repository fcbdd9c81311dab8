import { createHash } from 'node:crypto'
import { ident } from '../store/sql.js'
import { SQL_TYPE, SYSTEM_COLUMNS, extractExpr, type ProjectedColumn } from './columns.js'

/**
 * The statements that create, widen and maintain one organization's projection table. Pure:
 * sync.ts runs them. `$1` is always the organization id.
 */

/**
 * The table and the indexes every projection has. Few indexes on purpose: each one is paid on
 * every asset write (a 10,000-item bulk create must stay cheap), and the benchmark queries are
 * served by a scan of this narrow table (see docs/indexes-and-plans.md):
 * - (name, id) and (created_at, id): the first page of a sorted search walks the index and stops
 *   after `size` matches instead of sorting every match;
 * - the primary key: the join back to `assets` for a page, and the EXISTS of relationship search.
 * org_id leads the key as in every table (CONTRACT: tables distributable by organization).
 */
export function createTableSql(table: string): string[] {
  const t = ident(table)
  return [
    `CREATE TABLE ${t} (org_id uuid NOT NULL, id uuid NOT NULL, asset_type_key text COLLATE "C" NOT NULL,
       name text COLLATE "C" NOT NULL, access_domain_key text COLLATE "C", created_at timestamptz NOT NULL,
       updated_at timestamptz NOT NULL, PRIMARY KEY (org_id, id))`,
    `CREATE INDEX ${ident(`${table}_name`)} ON ${t} (name, id)`,
    `CREATE INDEX ${ident(`${table}_created`)} ON ${t} (created_at, id)`,
  ]
}

/** Adds nullable columns without a default: a catalog change, the table is not rewritten. */
export function addColumnsSql(table: string, columns: readonly ProjectedColumn[]): string {
  return `ALTER TABLE ${ident(table)} ${columns.map((c) => `ADD COLUMN ${ident(c.column)} ${SQL_TYPE[c.kind]}`).join(', ')}`
}

/**
 * A btree index for the column of a `unique_key` property: lookups by an asset's natural key
 * (`properties.hostname equals "web-01"`) are the one selective property filter integrators run
 * all the time. Partial: assets of other types (NULL there) cost it nothing on write. Named by a
 * hash of the column so the name stays under 63 characters.
 */
export function uniqueKeyIndexSql(table: string, column: string): string {
  const name = `${table}_${createHash('sha256').update(column).digest('hex').slice(0, 8)}`
  return `CREATE INDEX IF NOT EXISTS ${ident(name)} ON ${ident(table)} (${ident(column)}) WHERE ${ident(column)} IS NOT NULL`
}

function columnList(columns: readonly ProjectedColumn[]): string {
  return [...SYSTEM_COLUMNS, ...columns.map((c) => c.column)].map(ident).join(', ')
}

function valueList(columns: readonly ProjectedColumn[], alias: string): string {
  return [...SYSTEM_COLUMNS.map((c) => `${alias}.${ident(c)}`), ...columns.map((c) => extractExpr(c.kind, c.key, alias))].join(', ')
}

/** Copies the live rows of `source` (`assets`, or a trigger's transition table) into the projection. */
function insertFrom(table: string, columns: readonly ProjectedColumn[], source: string): string {
  return `INSERT INTO ${ident(table)} (${columnList(columns)}) SELECT ${valueList(columns, 'n')} FROM ${source} n`
    + ' WHERE n.org_id = $1 AND n.archived_at IS NULL'
}

/** Fills a new table from the organization's live assets. */
export function backfillSql(table: string, columns: readonly ProjectedColumn[]): string {
  return insertFrom(table, columns, 'assets')
}

/** Fills columns just added to an existing table. */
export function backfillColumnsSql(table: string, columns: readonly ProjectedColumn[]): string {
  const sets = columns.map((c) => `${ident(c.column)} = ${extractExpr(c.kind, c.key, 'n')}`).join(', ')
  return `UPDATE ${ident(table)} p SET ${sets} FROM assets n WHERE n.org_id = $1 AND p.org_id = n.org_id AND p.id = n.id`
}

/** The four statements of the registry that `kbis_project_assets()` runs (migration 0002). */
export interface TriggerStatements {
  insert_sql: string
  upsert_sql: string
  archive_sql: string
  delete_sql: string
}

/**
 * INSERT copies new live rows; UPDATE deletes rows archived by the statement and upserts the
 * others (an update may also restore an archived asset); DELETE removes rows. All read the
 * statement's transition table (`new_assets` / `old_assets`), so a 10,000-row bulk write costs
 * one projection statement.
 */
export function triggerStatements(table: string, columns: readonly ProjectedColumn[]): TriggerStatements {
  const t = ident(table)
  const updated = [...SYSTEM_COLUMNS.filter((c) => c !== 'org_id' && c !== 'id'), ...columns.map((c) => c.column)]
  const sets = updated.map((c) => `${ident(c)} = EXCLUDED.${ident(c)}`).join(', ')
  return {
    insert_sql: insertFrom(table, columns, 'new_assets'),
    upsert_sql: `${insertFrom(table, columns, 'new_assets')} ON CONFLICT (org_id, id) DO UPDATE SET ${sets}`,
    archive_sql: `DELETE FROM ${t} p USING new_assets n WHERE n.org_id = $1 AND n.archived_at IS NOT NULL AND p.org_id = n.org_id AND p.id = n.id`,
    delete_sql: `DELETE FROM ${t} p USING old_assets o WHERE o.org_id = $1 AND p.org_id = o.org_id AND p.id = o.id`,
  }
}
