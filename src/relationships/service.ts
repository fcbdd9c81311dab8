import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { Params } from '../store/sql.js'
import { hasLevel, scopeFilter } from '../access/scope.js'
import { isUuid } from '../core/time.js'
import { toRelationshipRecord, type RelationshipRecord } from './mapper.js'
import type { RelationshipInput } from './prepare.js'
import { deleteRelationships, selectRelationships } from './sql.js'
import { compileWhere } from '../query/where.js'
import { columnCondition } from '../query/resolve.js'
import { cannotEdit } from './resolve.js'
import { resolveAssetRefs } from '../refs/resolve.js'
import { asSingleItem } from '../core/items.js'
import { createRelationships } from './create.js'
import { attachEnds, type EndIncludes } from './ends.js'
import type { Queryable } from '../store/db.js'
import { originOf } from '../outbox/write.js'

function notFound(id: string): AppError {
  return new AppError(Errors.NOT_FOUND, `relationship ${id} not found`)
}

function requireWriter(ctx: RequestContext): void {
  if (ctx.auth.permission === 'Viewer') throw new AppError(Errors.FORBIDDEN, 'a Viewer key cannot write')
}

/**
 * POST /relationships: a bulk create of one item (relationships/create.ts). The ends may be UUIDs
 * or composite keys; the type's allowed asset types are enforced (422), edit on the source is
 * needed (403), and an existing (type, source, target) is refused (409 duplicate_relationship).
 */
export async function createRelationship(ctx: RequestContext, input: RelationshipInput): Promise<RelationshipRecord> {
  requireWriter(ctx)
  const [row] = await asSingleItem(() => createRelationships(ctx, [input]))
  return toRelationshipRecord(row!)
}

/** One visible relationship by id: both ends live and visible, checked in the statement. */
async function findRelationship(ctx: RequestContext, db: Queryable, id: string, lock = false) {
  if (!isUuid(id)) throw notFound(id)
  const params = new Params()
  const filter = columnCondition('relationships', 'id', id.toLowerCase())
  const where = compileWhere({ target: 'relationships', alias: 'r', orgId: ctx.auth.orgId, filter, scope: scopeFilter(ctx.auth, 'view') }, params)
  const row = (await selectRelationships(db, where, params, lock))[0]
  if (!row) throw notFound(id)
  return row
}

export async function getRelationship(ctx: RequestContext, id: string, include: EndIncludes): Promise<RelationshipRecord> {
  const record = toRelationshipRecord(await findRelationship(ctx, ctx.db, id))
  return (await attachEnds(ctx, [record], include))[0]!
}

/** DELETE /relationships/{id}: permanent; needs edit on the source asset (403 when only visible). */
export async function deleteRelationship(ctx: RequestContext, id: string): Promise<void> {
  requireWriter(ctx)
  await ctx.db.transaction(async (tx) => {
    const row = await findRelationship(ctx, tx, id, true)
    const source = (await resolveAssetRefs(ctx, tx, [row.source_asset_id])).get(row.source_asset_id)
    if (!source) throw notFound(id)
    if (!hasLevel(ctx.auth, source, 'edit')) throw new AppError(Errors.FORBIDDEN, cannotEdit(source))
    await deleteRelationships(tx, originOf(ctx), [row.id])
  })
}
