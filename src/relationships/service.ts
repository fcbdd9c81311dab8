import { AppError, Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../core/context.js'
import { Params } from '../store/sql.js'
import { hasLevel } from '../access/scope.js'
import { isUuid } from '../core/time.js'
import { toRelationshipRecord, type RelationshipRecord } from './mapper.js'
import { prepareRelationships, type RelationshipInput } from './prepare.js'
import { deleteRelationshipById, insertRelationships, selectRelationships } from './sql.js'
import { visibleRelationship } from './scope.js'
import { cannotEdit, resolveAssetRefs } from './resolve.js'
import { attachEnds, type EndIncludes } from './ends.js'
import type { Queryable } from '../store/db.js'

function notFound(id: string): AppError {
  return new AppError(Errors.NOT_FOUND, `relationship ${id} not found`)
}

function requireWriter(ctx: RequestContext): void {
  if (ctx.auth.permission === 'Viewer') throw new AppError(Errors.FORBIDDEN, 'a Viewer key cannot write')
}

/** A single write answers with plain pointers: `meta.index` only makes sense in bulk requests. */
function single(issues: Issue[]): Issue[] {
  return issues.map(({ meta: _meta, ...issue }) => issue)
}

/**
 * POST /relationships. The ends may be UUIDs or composite keys; the type's allowed asset types
 * are enforced (422), edit on the source is needed (403), and an existing (type, source, target)
 * is refused by the unique constraint (409 duplicate_relationship, mapped in pg-errors.ts), so two
 * concurrent creations cannot both succeed.
 */
export async function createRelationship(ctx: RequestContext, input: RelationshipInput): Promise<RelationshipRecord> {
  requireWriter(ctx)
  return ctx.db.transaction(async (tx) => {
    const prepared = await prepareRelationships(ctx, [input], tx, () => '')
    if (prepared.forbidden.length > 0) throw new AppError(Errors.FORBIDDEN, single(prepared.forbidden))
    if (prepared.issues.length > 0) throw new AppError(Errors.VALIDATION_FAILED, single(prepared.issues))
    const [row] = await insertRelationships(tx, ctx.auth.orgId, prepared.rows)
    return toRelationshipRecord(row!)
  })
}

/** One visible relationship by id: both ends live and visible, checked in the statement. */
async function findRelationship(ctx: RequestContext, db: Queryable, id: string, lock = false) {
  if (!isUuid(id)) throw notFound(id)
  const params = new Params([ctx.auth.orgId, id.toLowerCase()])
  const where = `r.org_id = $1 AND r.id = $2 AND ${visibleRelationship(ctx.auth, 'r', params)}`
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
    await deleteRelationshipById(tx, ctx.auth.orgId, row.id)
  })
}
