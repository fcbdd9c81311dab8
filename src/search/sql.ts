import type { Queryable } from '../store/db.js'
import { ident, Params } from '../store/sql.js'
import { ASSET_COLUMNS, type AssetRow } from '../assets/mapper.js'
import type { ListQuery } from '../assets/sql.js'

/**
 * One page of an asset search and its total: the filter, the scope and the order run over the
 * projection `p` (typed columns, live assets only); only the page's rows are joined back to
 * `assets a` for their documents, by primary key. Page and count run side by side.
 *
 * @example where `p.org_id = $1 AND p."t_environment" = $2`, orderBy `p."name" ASC, p."id" ASC`
 *   SELECT a.id, … FROM "assets_typed_…" p JOIN assets a ON a.org_id = p.org_id AND a.id = p.id
 *   WHERE … ORDER BY … LIMIT $3 OFFSET $4
 */
export async function selectSearchPage(db: Queryable, table: string, q: ListQuery): Promise<{ rows: AssetRow[]; total: number }> {
  const from = `${ident(table)} p`
  const pageParams = new Params(q.params.values)
  const limit = pageParams.add(q.limit)
  const offset = pageParams.add(q.offset)
  const [rows, count] = await Promise.all([
    db.query<AssetRow>(
      `SELECT ${ASSET_COLUMNS} FROM ${from} JOIN assets a ON a.org_id = p.org_id AND a.id = p.id
       WHERE ${q.where} ORDER BY ${q.orderBy} LIMIT ${limit} OFFSET ${offset}`,
      pageParams.values,
    ),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${from} WHERE ${q.where}`, q.params.values),
  ])
  return { rows: rows.rows, total: count.rows[0]?.n ?? 0 }
}
