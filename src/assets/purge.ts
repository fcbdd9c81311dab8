import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { deleteRelationships } from '../relationships/sql.js'
import { toAssetRecord, type AssetRecord } from './mapper.js'
import { countVisibleRelationshipsOf, findArchived } from './restore.js'
import { originOf } from '../outbox/write.js'
import { deleteAssetsPermanently, selectRelationshipIdsOf } from './sql.js'

/**
 * Deletes an archived asset for good (console only, CONTRACT §15): Admin (or Owner) and `delete`
 * on it, after the caller typed its name. Its relationships go with it, whatever the state of
 * their other end. Returns the asset as it was, and how many of its relationships the caller saw.
 */
export async function deleteArchivedAsset(ctx: RequestContext, id: string, confirmName: string): Promise<{ asset: AssetRecord; relationships: number }> {
  if (ctx.auth.permission !== 'Admin') throw new AppError(Errors.FORBIDDEN, 'only an Admin or the Owner can delete assets permanently')
  return ctx.db.transaction(async (tx) => {
    const row = await findArchived(ctx, tx, id, 'delete')
    if (confirmName !== row.name) {
      throw new AppError(Errors.VALIDATION_FAILED, [{ detail: `the name typed does not match: type ${row.name} exactly to delete it`, pointer: '/confirm_name' }])
    }
    // Relationships first: their events read the ends' types and domains from the asset rows.
    const seen = await countVisibleRelationshipsOf(tx, ctx.auth, row.id, false)
    await deleteRelationships(tx, originOf(ctx), await selectRelationshipIdsOf(tx, ctx.auth.orgId, [row.id]))
    const [deleted] = await deleteAssetsPermanently(tx, originOf(ctx), [row.id])
    return { asset: toAssetRecord(deleted!), relationships: seen }
  })
}
