import { Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../core/context.js'
import { prepareRelationships, type NewRelationshipRow, type RelationshipInput } from '../relationships/embedded.js'
import { insertBulkRelationships, selectExistingRelationshipIds } from './sql.js'
import { entryOf, failIfAny, type BulkEntry, type BulkItem } from './items.js'

export type BulkRelationshipInput = RelationshipInput & BulkItem

const rowKey = (row: NewRelationshipRow): string => `${row.relationship_type_key}\u0000${row.source_asset_id}\u0000${row.target_asset_id}`

/**
 * The rows the insert skipped are duplicates: of an earlier item of the request (found here by
 * key) or of a relationship that exists already. One 409 lists them all.
 */
function duplicateIssues(rows: readonly NewRelationshipRow[], inserted: ReadonlySet<string>): Issue[] {
  const firstIndex = new Map<string, number>()
  const issues: Issue[] = []
  rows.forEach((row, i) => {
    const key = rowKey(row)
    const first = firstIndex.get(key)
    if (first === undefined) firstIndex.set(key, i)
    if (inserted.has(row.id)) return
    issues.push({
      detail: first === undefined
        ? `a ${row.relationship_type_key} relationship between these assets exists already`
        : `the same ${row.relationship_type_key} relationship is given by item ${first}`,
      pointer: `/${i}`,
    })
  })
  return issues
}

/**
 * POST /bulk/relationships: one transaction, a handful of statements whatever the item count:
 * one look-up of every end (UUIDs and composite keys together), one INSERT that skips
 * duplicates instead of aborting on the first, so every duplicate item can be listed.
 */
export async function createRelationshipsInBulk(ctx: RequestContext, items: readonly BulkRelationshipInput[]): Promise<BulkEntry[]> {
  return ctx.db.transaction(async (tx) => {
    const prepared = await prepareRelationships(ctx, items, tx)
    failIfAny(Errors.VALIDATION_FAILED, prepared.issues)
    failIfAny(Errors.FORBIDDEN, prepared.forbidden)
    const written = await insertBulkRelationships(tx, ctx.auth.orgId, prepared.rows)
    if (written < prepared.rows.length) {
      const inserted = await selectExistingRelationshipIds(tx, ctx.auth.orgId, prepared.rows.map((row) => row.id))
      failIfAny(Errors.DUPLICATE_RELATIONSHIP, duplicateIssues(prepared.rows, inserted))
    }
    return prepared.rows.map((row, i) => entryOf(row.id, items[i]!))
  })
}
