import type { Queryable } from '../store/db.js'
import { Params, isoSecondSql } from '../store/sql.js'
import { ASSET_COLUMNS, type AssetRow } from '../assets/mapper.js'

export interface ExportQuery {
  where: string
  params: Params
}

/** What follows the keyset condition of a batch: the rows after `afterId` in id order, at most `size`. */
function batchOf(query: ExportQuery, afterId: string | null, size: number): { params: Params; from: string } {
  const params = new Params(query.params.values)
  const after = afterId === null ? '' : ` AND a.id > ${params.add(afterId)}::uuid`
  return { params, from: `FROM assets a WHERE ${query.where}${after} ORDER BY a.id LIMIT ${params.add(size)}` }
}

/**
 * One keyset batch of a CSV export: the rows after `afterId` in id order. Keyset (not OFFSET, not
 * a cursor held open) keeps each statement short and on the primary key (org_id, id), whatever the
 * number of rows already sent, and holds no connection while the client reads slowly.
 *
 * @example selectExportBatch(db, {where: 'a.org_id = $1 AND a.archived_at IS NULL', params}, null, 1000)
 *   // SELECT a.id, … FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL ORDER BY a.id LIMIT 1000
 */
export async function selectExportBatch(db: Queryable, query: ExportQuery, afterId: string | null, size: number): Promise<AssetRow[]> {
  const batch = batchOf(query, afterId, size)
  const result = await db.query<AssetRow>(`SELECT ${ASSET_COLUMNS} ${batch.from}`, batch.params.values)
  return result.rows
}

/**
 * One record (CONTRACT §2, no includes) as a JSON line, written by the store: the members in the
 * record's order, strings escaped by `to_json` as JSON.stringify escapes them, the properties as
 * jsonb writes them (`{"a": 1}`, a space after each colon and comma), timestamps to the second.
 */
const NDJSON_LINE = `'{"id":"' || a.id || '","asset_type_key":' || to_json(a.asset_type_key)::text
  || ',"name":' || to_json(a.name)::text
  || ',"access_domain_key":' || coalesce(to_json(a.access_domain_key)::text, 'null')
  || ',"properties":' || a.properties::text
  || ',"created_at":"' || ${isoSecondSql('a.created_at')} || '","updated_at":"' || ${isoSecondSql('a.updated_at')} || '"}'`

/**
 * One keyset batch of an NDJSON export (as selectExportBatch) as its text, each line ended by
 * `\n`, with the last id and the number of rows: the store writes the JSON, the process only
 * passes the text on (parsing every row and writing it again was most of an export's CPU time).
 */
export async function selectNdjsonBatch(db: Queryable, query: ExportQuery, afterId: string | null, size: number): Promise<{ text: string; lastId: string | null; rows: number }> {
  const batch = batchOf(query, afterId, size)
  const result = await db.query<{ text: string | null; last_id: string | null; n: number }>(
    `SELECT string_agg(line, E'\\n' ORDER BY id) || E'\\n' AS text, (array_agg(id ORDER BY id DESC))[1] AS last_id, count(*)::int AS n
     FROM (SELECT a.id, ${NDJSON_LINE} AS line ${batch.from}) b`,
    batch.params.values,
  )
  const row = result.rows[0]
  return { text: row?.text ?? '', lastId: row?.last_id ?? null, rows: Number(row?.n ?? 0) }
}
