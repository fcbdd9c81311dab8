import type { RequestContext } from '../request/context.js'
import { Params } from '../store/sql.js'
import { offsetOf, pageFromQuery, pageMeta, type JsonPage, type PageMeta } from '../core/pagination.js'
import { scopeFilter } from '../access/scope.js'
import { parseListFilters, resolveListFilters } from '../query/list.js'
import { compileWhere } from '../query/where.js'
import { compileOrderBy, parseSortParam } from '../query/sort.js'
import { JSONB_STORAGE } from '../query/compile.js'
import { assetTypesOf } from '../query/asset-types.js'
import { assetCountOptions } from '../counts/live.js'
import { includeOptionsFromQuery, includeRelationshipsWith } from '../relationships/include.js'
import { selectAssetPage } from './sql.js'
import { toAssetRecord, type AssetRecord } from './mapper.js'

/**
 * GET /assets: equality filters, sort and page, compiled by the query compiler and ANDed with the
 * key's access scope in one statement (plus one count), then the included relationships. Without
 * includes the records come as the store wrote them in JSON (a JsonPage), passed on as text.
 */
export async function listAssets(ctx: RequestContext, query: Record<string, unknown>): Promise<{ data: AssetRecord[]; page: PageMeta } | JsonPage> {
  const page = pageFromQuery(query)
  const params = new Params()
  const filter = parseListFilters(query)
  const where = compileWhere({
    target: 'assets', alias: 'a', orgId: ctx.auth.orgId,
    filter: resolveListFilters(filter, 'assets', ctx.metamodel), scope: scopeFilter(ctx.auth, 'view'),
  }, params)
  const sort = typeof query.sort === 'string' ? parseSortParam(query.sort) : []
  const orderBy = compileOrderBy(sort, 'assets', ctx.metamodel, 'a', JSONB_STORAGE, assetTypesOf(filter))
  const include = includeOptionsFromQuery(query)
  const q = { where, orderBy, limit: page.size, offset: offsetOf(page), params }
  const count = assetCountOptions(ctx.auth, filter, page.count === 'exact', ctx.counts)
  if (include === null) {
    const result = await selectAssetPage(ctx.db, q, count, 'json')
    return { json: result.rows.map((row) => row.doc), page: pageMeta(page, result) }
  }
  const result = await selectAssetPage(ctx.db, q, count, 'rows')
  return { data: await includeRelationshipsWith(ctx, result.rows.map(toAssetRecord), include), page: pageMeta(page, result) }
}
