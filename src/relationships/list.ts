import type { RequestContext } from '../request/context.js'
import { Params } from '../store/sql.js'
import { offsetOf, pageFromQuery, pageMeta, type JsonPage, type PageMeta } from '../core/pagination.js'
import { isUuid } from '../core/time.js'
import { parseAssetRef } from '../metamodel/refs.js'
import { parseListFilters, resolveListFilters } from '../query/list.js'
import { compileWhere } from '../query/where.js'
import { MATCH_NONE, andNodes } from '../query/resolve.js'
import { compileOrderBy, parseSortParam } from '../query/sort.js'
import { toRelationshipRecord, type RelationshipRecord } from './mapper.js'
import { selectRelationshipPage } from './sql.js'
import { scopeFilter } from '../access/scope.js'
import { attachEnds, parseEndIncludes } from './ends.js'

const END_FILTERS = ['filter[source_asset_id]', 'filter[target_asset_id]']

/**
 * An end filter naming no asset at all (not a UUID, not a composite key of a type with a unique
 * key) matches nothing, as GET /assets/{that} answers 404: it is taken out of the query and the
 * list made empty, rather than answered 400.
 */
function splitUnresolvable(query: Record<string, unknown>, ctx: RequestContext): { query: Record<string, unknown>; nothing: boolean } {
  const rest = { ...query }
  let nothing = false
  for (const key of END_FILTERS) {
    const value = rest[key]
    if (typeof value === 'string' && !isUuid(value) && parseAssetRef(value, ctx.metamodel) === null) {
      delete rest[key]
      nothing = true
    }
  }
  return { query: rest, nothing }
}

/**
 * GET /relationships: equality filters (relationship_type_key, source_asset_id, target_asset_id,
 * composite keys accepted), sort, page and include, compiled by the query compiler and ANDed with
 * the visibility of both ends in one statement (plus one count, plus one for included ends).
 * Without included ends the records come as the store wrote them in JSON (a JsonPage).
 */
export async function listRelationships(ctx: RequestContext, query: Record<string, unknown>): Promise<{ data: RelationshipRecord[]; page: PageMeta } | JsonPage> {
  const include = parseEndIncludes(query.include)
  const page = pageFromQuery(query)
  const split = splitUnresolvable(query, ctx)
  const params = new Params()
  const filter = resolveListFilters(parseListFilters(split.query), 'relationships', ctx.metamodel)
  const where = compileWhere({
    target: 'relationships', alias: 'r', orgId: ctx.auth.orgId,
    filter: split.nothing ? andNodes(filter, MATCH_NONE) : filter, scope: scopeFilter(ctx.auth, 'view'),
  }, params)
  const sort = typeof query.sort === 'string' ? parseSortParam(query.sort) : []
  const orderBy = compileOrderBy(sort, 'relationships', ctx.metamodel, 'r')
  const q = { where, orderBy, limit: page.size, offset: offsetOf(page), params }
  const count = { exact: page.count === 'exact', memo: ctx.counts }
  if (include.source === 'none' && include.target === 'none') {
    const result = await selectRelationshipPage(ctx.db, q, count, 'json')
    return { json: result.rows.map((row) => row.doc), page: pageMeta(page, result) }
  }
  const result = await selectRelationshipPage(ctx.db, q, count, 'rows')
  const data = await attachEnds(ctx, result.rows.map(toRelationshipRecord), include)
  return { data, page: pageMeta(page, result) }
}
