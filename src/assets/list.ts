import type { RequestContext } from '../core/context.js'
import { Params } from '../store/sql.js'
import { offsetOf, pageFromQuery, pageMeta, type PageMeta } from '../core/pagination.js'
import { scopeCondition } from '../access/scope.js'
import { parseListFilters, resolveListFilters } from '../query/list.js'
import { compileFilter } from '../query/compile.js'
import { compileOrderBy, parseSortParam } from '../query/sort.js'
import { assetCountOptions } from '../counts/live.js'
import { selectAssetPage } from './sql.js'
import { toAssetRecord, type AssetRecord } from './mapper.js'

/**
 * GET /assets: equality filters, sort and page, compiled by the query compiler and ANDed with the
 * key's access scope in one statement (plus one count).
 */
export async function listAssets(ctx: RequestContext, query: Record<string, unknown>): Promise<{ data: AssetRecord[]; page: PageMeta }> {
  const page = pageFromQuery(query)
  const params = new Params([ctx.auth.orgId])
  const conditions = ['a.org_id = $1', 'a.archived_at IS NULL']
  const filter = parseListFilters(query)
  if (filter) conditions.push(compileFilter(resolveListFilters(filter, 'assets', ctx.metamodel), params, 'a'))
  const scope = scopeCondition(ctx.auth, 'a', 'view', params)
  if (scope !== 'TRUE') conditions.push(scope)
  const sort = typeof query.sort === 'string' ? parseSortParam(query.sort) : []
  const orderBy = compileOrderBy(sort, 'assets', ctx.metamodel, 'a', params)
  const result = await selectAssetPage(ctx.db, {
    where: conditions.join(' AND '),
    orderBy,
    limit: page.size,
    offset: offsetOf(page),
    params,
  }, assetCountOptions(ctx.auth, filter, page.count === 'exact'))
  return { data: result.rows.map(toAssetRecord), page: pageMeta(page, result) }
}
