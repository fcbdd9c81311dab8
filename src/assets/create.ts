import { Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Tx } from '../store/db.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import { prepareNewAsset, type AssetInput } from './prepare.js'
import { insertAssets, type NewAssetRow } from './sql.js'
import type { AssetRow } from './mapper.js'
import { checkBesideFailures, syncEmbeddedRelationships } from '../relationships/embedded.js'
import { duplicateClaims, ItemFailures, type BulkItem, type UniqueClaim } from '../core/items.js'
import { originOf } from '../outbox/write.js'
import { pushAll } from '../core/arrays.js'

export type BulkAssetInput = AssetInput & BulkItem

const PLACEHOLDER: NewAssetRow = Object.freeze({ id: '', asset_type_key: '', name: '', access_domain_key: null, properties: {}, unique_value: null })

/** Pure: every item against the metamodel and the key's roles; failures are recorded, not thrown. */
function prepareRows(ctx: RequestContext, items: readonly BulkAssetInput[], failures: ItemFailures): NewAssetRow[] {
  const rows: NewAssetRow[] = []
  const invalid: Issue[] = []
  const forbidden: Issue[] = []
  const malformed = new Set(failures.failed)
  for (let i = 0; i < items.length; i++) {
    // An item that broke the body's schema is not looked at (its row stands in, never written).
    if (malformed.has(i)) {
      rows.push(PLACEHOLDER)
      continue
    }
    const { row, issues } = prepareNewAsset(ctx.metamodel, items[i]!, `/${i}`)
    rows.push(row)
    pushAll(invalid, issues)
    if (issues.length === 0 && !hasLevel(ctx.auth, row, 'edit')) {
      forbidden.push({
        detail: `the key's roles do not allow to create ${row.asset_type_key} assets in ${describeDomain(row.access_domain_key)}`,
        pointer: `/${i}`,
      })
    }
  }
  failures.add(Errors.VALIDATION_FAILED, invalid)
  failures.add(Errors.FORBIDDEN, forbidden)
  return rows
}

function claimsOf(rows: readonly NewAssetRow[], skipped: ReadonlySet<number>): UniqueClaim[] {
  const claims: UniqueClaim[] = []
  rows.forEach((row, index) => {
    if (row.unique_value !== null && !skipped.has(index)) claims.push({ index, asset_type_key: row.asset_type_key, unique_value: row.unique_value })
  })
  return claims
}

function uniquePointer(ctx: RequestContext, index: number, typeKey: string): string {
  return `/${index}/properties/${ctx.metamodel.assetTypes.get(typeKey)?.unique_property_key ?? ''}`
}

/**
 * Two concurrent imports claiming the same values in different orders would each wait for the
 * other's uncommitted value (a deadlock); claiming them in one global order makes the second
 * wait, then find its clashes.
 */
export function inUniqueOrder(rows: readonly NewAssetRow[]): NewAssetRow[] {
  const text = (a: string | null, b: string | null) => (a === b ? 0 : a === null ? -1 : b === null ? 1 : a < b ? -1 : 1)
  return [...rows].sort((a, b) => text(a.asset_type_key, b.asset_type_key) || text(a.unique_value, b.unique_value))
}

/**
 * Inserts every row of a valid item that does not repeat an earlier item's unique value; the
 * rows the insert skipped hold values already taken in the store. Both kinds of clash are
 * recorded as 409s of their items. Returns the rows written, by id.
 */
async function insertOrListClashes(ctx: RequestContext, tx: Tx, rows: readonly NewAssetRow[], failures: ItemFailures): Promise<Map<string, AssetRow>> {
  const issues: Issue[] = []
  const skipped = new Set(failures.failed)
  for (const { claim, firstIndex } of duplicateClaims(claimsOf(rows, skipped))) {
    skipped.add(claim.index)
    issues.push({
      detail: `${claim.asset_type_key} ${claim.unique_value}: the same unique value is given by item ${firstIndex}`,
      pointer: uniquePointer(ctx, claim.index, claim.asset_type_key),
    })
  }
  const candidates = skipped.size === 0 ? rows : rows.filter((_, i) => !skipped.has(i))
  const written = new Map((await insertAssets(tx, originOf(ctx), inUniqueOrder(candidates))).map((row) => [row.id, row]))
  if (written.size < candidates.length) {
    rows.forEach((row, i) => {
      if (skipped.has(i) || written.has(row.id)) return
      issues.push({
        detail: `${row.asset_type_key} ${row.unique_value}: the unique value is already taken by another asset of this type`,
        pointer: uniquePointer(ctx, i, row.asset_type_key),
      })
    })
  }
  failures.add(Errors.UNIQUE_VIOLATION, issues)
  return written
}

/**
 * POST /bulk/assets (and POST /assets, a bulk create of one): validate all, then one transaction: one INSERT for every row, and one
 * relationship sync for the items that embed relationships. They run after the insert, so
 * `related_assets` may name (by composite key) assets created by other items of the request.
 * A failing item fails the request, but the others still go through every check, so that the
 * answer lists every failing item (malformed, invalid, forbidden, clashing, with relationships that
 * fail); then nothing is kept.
 */
export async function createAssets(ctx: RequestContext, items: readonly BulkAssetInput[], failures = new ItemFailures()): Promise<AssetRow[]> {
  const rows = prepareRows(ctx, items, failures)
  return ctx.db.transaction(async (tx) => {
    const written = await insertOrListClashes(ctx, tx, rows, failures)
    const syncs = rows.flatMap((row, i) =>
      failures.failed.has(i) || items[i]!.relationships === undefined
        ? []
        : [{ asset: row, relationships: items[i]!.relationships, pointer: `/${i}/relationships` }],
    )
    if (failures.failed.size > 0) {
      // The relationships of the items that passed are checked too (every failing item listed);
      // an asset that a failed item would have created is not reported missing.
      await checkBesideFailures(tx, ctx, syncs, failures, [...failures.failed].map((i) => rows[i]!))
    }
    failures.throwIfAny()
    if (syncs.length > 0) await syncEmbeddedRelationships(tx, ctx, syncs)
    return rows.map((row) => written.get(row.id)!)
  })
}
