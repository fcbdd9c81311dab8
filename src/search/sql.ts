import type { Queryable } from '../store/db.js'
import { ident, selectPage, type CountOptions, type DocRow, type PageQuery, type PageRows } from '../store/sql.js'
import { ASSET_RECORD_JSON, type AssetRow } from '../assets/mapper.js'
import { ASSET_PAGE_READS } from '../assets/sql.js'

/**
 * One page of an asset search and its total: the filter, the scope and the order run over the
 * projection `p` (typed columns, live assets only); only the page's rows read `assets a`, by
 * primary key. Page and count run side by side.
 *
 * As documents (`json`), each row's document is a scalar subquery on `assets` rather than a join:
 * the planner then plans one relation and a subquery with one index condition instead of a join
 * over every index of `assets` — on PostgreSQL ≈ 0.15 ms of the ≈ 0.4 ms a search page's plan
 * took, out of ≈ 1.3 ms of server time per request (decision 0021). The projection and `assets`
 * change in the same transaction, so every row of `p` has its asset in the statement's snapshot.
 * PostgreSQL only: on PGlite the same search answered 286–288 req/s against 317–343 with the join
 * (20,000 servers, scripts/profile-reads.ts).
 *
 * @example where `p."t_environment" = $1`, orderBy `p."name" ASC, p."id" ASC`, as documents
 *   SELECT (SELECT '{"id":"' || a.id || … FROM assets a WHERE a.org_id = p.org_id AND a.id = p.id) AS doc
 *   FROM "assets_typed_…" p WHERE … ORDER BY … LIMIT $2 OFFSET $3
 */
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: 'rows'): Promise<PageRows<AssetRow>>
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: 'json'): Promise<PageRows<DocRow>>
export async function selectSearchPage(db: Queryable, table: string, q: PageQuery, count: CountOptions, as: keyof typeof ASSET_PAGE_READS): Promise<PageRows<AssetRow | DocRow>> {
  const projection = `${ident(table)} p`
  if (as === 'json' && db.kind === 'postgres') {
    const doc = `(SELECT ${ASSET_RECORD_JSON} FROM assets a WHERE a.org_id = p.org_id AND a.id = p.id) AS doc`
    return selectPage<DocRow>(db, { select: doc, docRows: true, from: projection, key: 'p' }, q, count)
  }
  return selectPage<AssetRow>(db, { ...ASSET_PAGE_READS[as], from: `${projection} JOIN assets a ON a.org_id = p.org_id AND a.id = p.id`, countFrom: projection, key: 'p' }, q, count)
}
