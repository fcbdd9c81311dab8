import { Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Tx } from '../store/db.js'
import { isUuid, newId } from '../core/time.js'
import { parseAssetRef } from '../metamodel/refs.js'
import { resolveAssetRefs } from '../refs/resolve.js'
import { prepareRelationships, type RelationshipInput } from './prepare.js'
import { insertRelationships, type NewRelationshipRow } from './sql.js'
import type { RelationshipRow } from './mapper.js'
import { ItemFailures, type BulkItem } from '../core/items.js'

export type BulkRelationshipInput = RelationshipInput & BulkItem

/**
 * POST /bulk/relationships, and POST /relationships as a bulk create of one: one transaction, a
 * handful of statements whatever the item count. Returns the rows written, in item order.
 * A valid request (the common case) is one INSERT that checks every end in SQL, after one
 * look-up of composite-key ends if there are any. When that INSERT writes fewer rows than items,
 * it is undone and the request is gone through item by item, so that every invalid or
 * duplicate item is listed with its reason.
 */
export async function createRelationships(ctx: RequestContext, items: readonly BulkRelationshipInput[], failures = new ItemFailures()): Promise<RelationshipRow[]> {
  return ctx.db.transaction(async (tx) =>
    (failures.failed.size === 0 ? await insertIfAllValid(ctx, tx, items) : null) ?? insertItemByItem(ctx, tx, items, failures))
}

/** The one-statement path; null (nothing written) when some item is invalid or a duplicate. */
async function insertIfAllValid(ctx: RequestContext, tx: Tx, items: readonly BulkRelationshipInput[]): Promise<RelationshipRow[] | null> {
  const ids = await endIds(ctx, tx, items)
  if (!ids) return null
  const rows = items.map((item): NewRelationshipRow => ({
    id: newId(),
    relationship_type_key: item.relationship_type_key,
    source_asset_id: ids.get(item.source_asset_id)!,
    target_asset_id: ids.get(item.target_asset_id)!,
  }))
  await tx.query('SAVEPOINT bulk_relationships')
  const written = await insertRelationships(tx, ctx, rows, { check: true })
  if (written.length === rows.length) return written
  await tx.query('ROLLBACK TO SAVEPOINT bulk_relationships')
  return null
}

/**
 * The asset id each end reference names: UUIDs as they are, composite keys with one look-up.
 * null when a composite key names no asset the key can see (the item-by-item path says which).
 */
async function endIds(ctx: RequestContext, tx: Tx, items: readonly RelationshipInput[]): Promise<Map<string, string> | null> {
  const ids = new Map<string, string>()
  const composite = new Set<string>()
  for (const item of items) {
    for (const ref of [item.source_asset_id, item.target_asset_id]) {
      if (ids.has(ref) || composite.has(ref)) continue
      if (isUuid(ref)) ids.set(ref, ref.toLowerCase())
      else if (parseAssetRef(ref, ctx.metamodel)) composite.add(ref)
      else return null
    }
  }
  if (composite.size === 0) return ids
  for (const [ref, asset] of await resolveAssetRefs(ctx, tx, composite)) {
    if (!asset) return null
    ids.set(ref, asset.id)
  }
  return ids
}

/**
 * Every item checked on its own against the metamodel, the store and the key's roles (one
 * look-up of every end), then one INSERT of the valid ones that skips duplicates instead of
 * aborting on the first: every invalid, forbidden or duplicate item is listed in one answer.
 */
async function insertItemByItem(ctx: RequestContext, tx: Tx, items: readonly BulkRelationshipInput[], failures: ItemFailures): Promise<RelationshipRow[]> {
  // Items that broke the body's schema are left out; every other one is checked.
  const prepared = await prepareRelationships(ctx, items, tx, new Set(failures.failed))
  failures.add(Errors.VALIDATION_FAILED, prepared.issues)
  failures.add(Errors.FORBIDDEN, prepared.forbidden)
  const valid = prepared.rows.flatMap((row, k) => (failures.failed.has(prepared.indexes[k]!) ? [] : [{ row, index: prepared.indexes[k]! }]))
  const rows = valid.map((v) => v.row)
  const written = await insertRelationships(tx, ctx, rows)
  if (written.length < rows.length) {
    const inserted = new Set(written.map((row) => row.id))
    failures.add(Errors.DUPLICATE_RELATIONSHIP, duplicateIssues(valid, inserted))
  }
  failures.throwIfAny()
  return written
}

const rowKey = (row: NewRelationshipRow): string => `${row.relationship_type_key}\u0000${row.source_asset_id}\u0000${row.target_asset_id}`

/**
 * The rows the insert skipped are duplicates: of an earlier item of the request (found here by
 * key) or of a relationship that exists already.
 */
function duplicateIssues(rows: readonly { row: NewRelationshipRow; index: number }[], inserted: ReadonlySet<string>): Issue[] {
  const firstIndex = new Map<string, number>()
  const issues: Issue[] = []
  for (const { row, index } of rows) {
    const key = rowKey(row)
    const first = firstIndex.get(key)
    if (first === undefined) firstIndex.set(key, index)
    if (inserted.has(row.id)) continue
    issues.push({
      detail: first === undefined
        ? `a ${row.relationship_type_key} relationship between these assets exists already`
        : `the same ${row.relationship_type_key} relationship is given by item ${first}`,
      pointer: `/${index}`,
    })
  }
  return issues
}
