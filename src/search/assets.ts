import type { RequestContext } from '../request/context.js'
import { offsetOf, pageMeta, type JsonPage, type PageMeta } from '../core/pagination.js'
import { scopeFilter } from '../access/scope.js'
import { toAssetRecord, type AssetRecord } from '../assets/mapper.js'
import { compileWhere } from '../query/where.js'
import { resolveFilter } from '../query/resolve.js'
import { compileOrderBy } from '../query/sort.js'
import { assetTypesOf } from '../query/asset-types.js'
import { includeOptionsFromBody, includeRelationshipsWith } from '../relationships/include.js'
import { ensureProjection } from '../projection/sync.js'
import { projectionStorage } from '../projection/storage.js'
import { Params } from '../store/sql.js'
import { readSearchBody } from './body.js'
import { assetCountOptions } from '../counts/live.js'
import { selectSearchPage } from './sql.js'

/** A page of asset records (objects). */
export interface RecordPage {
  data: AssetRecord[]
  page: PageMeta
}

/**
 * POST /search/assets: nested filter, sort, page and include (CONTRACT §4). Everything the body
 * says is checked before the store is asked anything; then one page query and one count over the
 * typed projection, with the key's access scope ANDed into the same WHERE, and one more statement
 * for included relationships. `as: 'json'` (the API's route): without includes the records come
 * as the store wrote them in JSON (a JsonPage), passed on as text; the console takes records.
 */
export async function searchAssets(ctx: RequestContext, body: unknown): Promise<RecordPage>
export async function searchAssets(ctx: RequestContext, body: unknown, as: 'json'): Promise<RecordPage | JsonPage>
export async function searchAssets(ctx: RequestContext, body: unknown, as: 'records' | 'json' = 'records'): Promise<RecordPage | JsonPage> {
  const parsed = readSearchBody(body)
  const include = includeOptionsFromBody({ include: parsed.include, relationships: parsed.relationships })
  const filter = resolveFilter(parsed.filter, 'assets', ctx.metamodel)
  const projection = await ensureProjection(ctx.db, ctx.metamodel)
  const storage = projectionStorage(projection)
  const params = new Params()
  const where = compileWhere({ target: 'assets', alias: 'p', orgId: ctx.auth.orgId, filter, scope: scopeFilter(ctx.auth, 'view'), storage }, params)
  const orderBy = compileOrderBy(parsed.sort, 'assets', ctx.metamodel, 'p', storage, assetTypesOf(parsed.filter))
  const q = { where, orderBy, limit: parsed.page.size, offset: offsetOf(parsed.page), params }
  const count = assetCountOptions(ctx.auth, parsed.filter, parsed.page.count === 'exact', ctx.counts)
  if (as === 'json' && include === null) {
    const result = await selectSearchPage(ctx.db, projection.table, q, count, 'json')
    return { json: result.rows.map((row) => row.doc), page: pageMeta(parsed.page, result) }
  }
  const result = await selectSearchPage(ctx.db, projection.table, q, count, 'rows')
  const records = result.rows.map(toAssetRecord)
  const data = include === null ? records : await includeRelationshipsWith(ctx, records, include)
  return { data, page: pageMeta(parsed.page, result) }
}
