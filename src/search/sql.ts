import type { Queryable } from '../store/db.js'
import { ident, selectPage, type CountOptions, type DocRow, type PageQuery, type PageRows } from '../store/sql.js'
import type { AssetRow } from '../assets/mapper.js'
import { ASSET_PAGE_READS } from '../assets/sql.js'

/**
 * One page of an asset search and its total: the filter, the scope and the order run over the
 * projection `p` (typed columns, live assets only); only the page's rows are joined back to
 * `assets a` for their documents, by primary key. Page and count run side by side.
 *
 * @example where `p.org_id = $1 AND p."t_environment" = $2`, orderBy `p."name" ASC, p."id" ASC`
 *   SELECT a.id, … FROM "assets_typed_…" p JOIN assets a ON a.org_id = p.org_id AND a.id = p.id
 *   WHERE … ORDER BY … LIMIT $3 OFFSET $4
 */
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: 'rows'): Promise<PageRows<AssetRow>>
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: 'json'): Promise<PageRows<DocRow>>
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: keyof typeof ASSET_PAGE_READS): Promise<PageRows<AssetRow | DocRow>> {
  const projection = `${ident(table)} p`
  return selectPage<AssetRow | DocRow>(db, { ...ASSET_PAGE_READS[as], from: `${projection} JOIN assets a ON a.org_id = p.org_id AND a.id = p.id`, countFrom: projection, key: 'p' }, q, count)
}
