import type { RequestContext } from '../request/context.js'
import { Errors } from '../core/errors.js'
import { offsetOf, pageMeta, type JsonPage, type PageMeta } from '../core/pagination.js'
import { compileWhere } from '../query/where.js'
import { resolveFilter } from '../query/resolve.js'
import { compileOrderBy } from '../query/sort.js'
import { ensureProjection } from '../projection/sync.js'
import { projectionStorage } from '../projection/storage.js'
import { attachEnds, NO_ENDS, readEndIncludes, type EndIncludes } from '../relationships/ends.js'
import { toRelationshipRecord, type RelationshipRecord } from '../relationships/mapper.js'
import { scopeFilter } from '../access/scope.js'
import { selectRelationshipPage } from '../relationships/sql.js'
import { Params } from '../store/sql.js'
import { failAt } from '../core/json.js'
import { readSearchBody } from './body.js'

/**
 * POST /search/relationships (CONTRACT §4): filter on the relationship's columns and on either
 * end (`source_asset.*`, `target_asset.*`, compiled to EXISTS over the typed projection), sort,
 * page, include of the ends. A relationship exists for the key only when both ends are live and
 * visible: that condition is ANDed into the same statement. Without included ends the records
 * come as the store wrote them in JSON (a JsonPage).
 */
export async function searchRelationships(ctx: RequestContext, body: unknown): Promise<{ data: RelationshipRecord[]; page: PageMeta } | JsonPage> {
  const parsed = readSearchBody(body)
  const include = parseEndIncludeList(parsed.include)
  const filter = resolveFilter(parsed.filter, 'relationships', ctx.metamodel)
  const storage = projectionStorage(await ensureProjection(ctx.db, ctx.metamodel))
  const params = new Params()
  const where = compileWhere({ target: 'relationships', alias: 'r', orgId: ctx.auth.orgId, filter, scope: scopeFilter(ctx.auth, 'view'), storage }, params)
  const orderBy = compileOrderBy(parsed.sort, 'relationships', ctx.metamodel, 'r', storage)
  const q = { where, orderBy, limit: parsed.page.size, offset: offsetOf(parsed.page), params }
  const count = { exact: parsed.page.count === 'exact', memo: ctx.counts }
  if (include.source === 'none' && include.target === 'none') {
    const result = await selectRelationshipPage(ctx.db, q, count, 'json')
    return { json: result.rows.map((row) => row.doc), page: pageMeta(parsed.page, result) }
  }
  const result = await selectRelationshipPage(ctx.db, q, count, 'rows')
  const data = await attachEnds(ctx, result.rows.map(toRelationshipRecord), include)
  return { data, page: pageMeta(parsed.page, result) }
}

/** The body's `include` array: the ends to expand, read as GET /relationships reads its parameter. */
function parseEndIncludeList(value: unknown): EndIncludes {
  if (value === undefined || value === null) return NO_ENDS
  if (!Array.isArray(value)) failAt(Errors.INVALID_INCLUDE, '/include', 'include must be an array of strings')
  return readEndIncludes(value, (i) => ({ pointer: `/include/${i}` }))
}
