import type { Queryable } from '../store/db.js'
import { Params } from '../store/sql.js'
import { ASSET_COLUMNS, type AssetRow } from '../assets/mapper.js'

/**
 * One keyset batch of an export: the rows after `afterId` in id order. Keyset (not OFFSET, not a
 * cursor held open) keeps each statement short and on the primary key (org_id, id), whatever the
 * number of rows already sent, and holds no connection while the client reads slowly.
 *
 * @example selectExportBatch(db, {where: 'a.org_id = $1 AND a.archived_at IS NULL', params}, null, 1000)
 *   // SELECT a.id, … FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL ORDER BY a.id LIMIT 1000
 */
export async function selectExportBatch(db: Queryable, query: { where: string; params: Params }, afterId: string | null, size: number): Promise<AssetRow[]> {
  const params = new Params(query.params.values)
  const after = afterId === null ? '' : ` AND a.id > ${params.add(afterId)}::uuid`
  const limit = params.add(size)
  const result = await db.query<AssetRow>(
    `SELECT ${ASSET_COLUMNS} FROM assets a WHERE ${query.where}${after} ORDER BY a.id LIMIT ${limit}`,
    params.values,
  )
  return result.rows
}
