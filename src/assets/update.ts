import { AppError, Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Tx } from '../store/db.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import { checkDomain, preparePropertiesPatch, type AssetPatch } from './prepare.js'
import { selectAssetsByKeys, updateAssets, type AssetChange } from './sql.js'
import type { AssetRow } from './mapper.js'
import { parseAssetRef, type AssetKey } from '../metamodel/refs.js'
import { selectAssetRefs, type AssetReference } from '../refs/sql.js'
import { CompositeKeyMap } from '../refs/resolve.js'
import { checkBesideFailures, syncEmbeddedRelationships, type EmbeddedSync } from '../relationships/embedded.js'
import { duplicateClaims, ItemFailures, type BulkItem, type UniqueClaim } from '../core/items.js'
import { originOf } from '../outbox/write.js'
import { pushAll } from '../core/arrays.js'

/** A PATCH /bulk/assets item; PATCH /assets/{id} is one such item (its body may repeat asset_type_key). */
export type BulkAssetPatch = AssetPatch & BulkItem & { id: string }

/** Where the request stands after applying its items in order. */
interface Plan {
  /** The asset id each item names (null when it names nothing visible). */
  ids: (string | null)[]
  /** Every named asset as the items before the current one left it (domain, unique value). */
  current: Map<string, AssetReference>
  /** Unique values as stored before the request. */
  original: Map<string, string | null>
  /** The change to write per asset, items folded in order. */
  patches: Map<string, AssetChange>
  /**
   * The same items cut, in order, into runs that name each asset at most once, each item its own
   * change: one run when no asset is named twice (then the same as `patches`). Written run after
   * run, an asset named by two items gets an event for each (CONTRACT §13: one event per item).
   */
  runs: Map<string, AssetChange>[]
  /** The last item that changed an asset's unique value (for pointers). */
  uniqueSetBy: Map<string, number>
}

/**
 * One statement finds and locks every named asset (FOR NO KEY UPDATE in id order: overlapping
 * bulk updates queue behind each other instead of deadlocking), reading only what access checks need.
 * Names resolve against the store as it is when the request starts; a hidden asset is "not
 * found" for its item.
 */
async function lockTargets(ctx: RequestContext, tx: Tx, items: readonly BulkAssetPatch[], malformed: ReadonlySet<number>, single: boolean): Promise<{ plan: Plan; missing: Issue[] }> {
  // An item that broke the body's schema names nothing here (its id may not even be a string).
  const keys = items.map((item, i) => (malformed.has(i) ? null : parseAssetRef(item.id, ctx.metamodel)))
  const rows = await selectAssetRefs(tx, ctx.auth.orgId, keys.filter((k): k is AssetKey => k !== null), true)
  const byId = new Map(rows.map((r) => [r.id, r]))
  const byComposite = CompositeKeyMap.of(rows)
  const plan: Plan = { ids: [], current: new Map(), original: new Map(), patches: new Map(), runs: [new Map()], uniqueSetBy: new Map() }
  const missing: Issue[] = []
  const timesNamed = new Map<string, number>()
  keys.forEach((key, i) => {
    const row = key === null ? undefined : 'id' in key ? byId.get(key.id) : byComposite.get(key)
    if (!row || !hasLevel(ctx.auth, row, 'view')) {
      // PATCH /assets/{id} names its asset in the path: a missing one is 404, not a body error.
      if (single) throw new AppError(Errors.NOT_FOUND, `asset ${items[i]!.id} not found`)
      plan.ids.push(null)
      if (!malformed.has(i)) missing.push({ detail: `asset ${items[i]!.id} not found`, pointer: `/${i}/id` })
      return
    }
    const named = (timesNamed.get(row.id) ?? 0) + 1
    timesNamed.set(row.id, named)
    if (named > MAX_ITEMS_PER_ASSET) {
      plan.ids.push(null)
      missing.push({ detail: `asset ${items[i]!.id} is named by more than ${MAX_ITEMS_PER_ASSET} items of this request; send its changes in fewer items`, pointer: `/${i}/id` })
      return
    }
    plan.ids.push(row.id)
    plan.current.set(row.id, { ...row })
    plan.original.set(row.id, row.unique_value)
  })
  return { plan, missing }
}

/**
 * Items of one request that may name the same asset. Each is written on its own (its own event,
 * CONTRACT §13), and PostgreSQL's updates of one row in one transaction each take longer than
 * the one before: 10,000 items naming one asset held its lock (and PGlite's one connection) for
 * 66–97 s (an outside probe).
 */
export const MAX_ITEMS_PER_ASSET = 100

/** The access rules of one item on the asset as the earlier items left it; null when allowed. */
function forbiddenIssue(ctx: RequestContext, current: AssetReference, item: BulkAssetPatch, index: number): Issue | null {
  if (!hasLevel(ctx.auth, current, 'edit')) {
    return { detail: `the key's roles do not allow to change ${current.asset_type_key} assets in ${describeDomain(current.access_domain_key)}`, pointer: `/${index}` }
  }
  if (item.access_domain_key === undefined || item.access_domain_key === current.access_domain_key) return null
  const moved = { ...current, access_domain_key: item.access_domain_key }
  if (hasLevel(ctx.auth, current, 'edit_access_domain') && hasLevel(ctx.auth, moved, 'edit_access_domain')) return null
  return { detail: 'moving an asset to another access domain needs edit_access_domain on both domains', pointer: `/${index}/access_domain_key` }
}

const noChange = (id: string): AssetChange => ({
  id, name: null, set_domain: false, access_domain_key: null, replace: false, props: {}, cleared: [], set_unique: false, unique_value: null,
})

/** Applies one item's values to a pending change (later values win, null clears a key). */
function applyTo(patch: AssetChange, item: BulkAssetPatch, uniqueKey: string | null | undefined): void {
  if (item.name !== undefined) patch.name = item.name
  if (item.access_domain_key !== undefined) {
    patch.set_domain = true
    patch.access_domain_key = item.access_domain_key
  }
  for (const [key, value] of Object.entries(item.properties ?? {})) {
    if (value === null) {
      delete patch.props[key]
      if (!patch.cleared.includes(key)) patch.cleared.push(key)
    } else {
      patch.props[key] = value
      if (patch.cleared.length > 0) patch.cleared = patch.cleared.filter((k) => k !== key)
    }
  }
  if (uniqueKey && item.properties !== undefined && uniqueKey in item.properties) {
    const value = item.properties[uniqueKey]
    patch.set_unique = true
    patch.unique_value = typeof value === 'string' ? value : null
  }
}

/** Folds one valid item into its asset's pending change, its run's, and the asset's current state. */
function fold(ctx: RequestContext, plan: Plan, id: string, item: BulkAssetPatch, index: number): void {
  const current = plan.current.get(id)!
  const uniqueKey = ctx.metamodel.assetTypes.get(current.asset_type_key)?.unique_property_key
  const patch = plan.patches.get(id) ?? noChange(id)
  applyTo(patch, item, uniqueKey)
  plan.patches.set(id, patch)
  let run = plan.runs[plan.runs.length - 1]!
  if (run.has(id)) plan.runs.push(run = new Map())
  const own = noChange(id)
  applyTo(own, item, uniqueKey)
  run.set(id, own)
  if (item.access_domain_key !== undefined) current.access_domain_key = item.access_domain_key
  if (own.set_unique) {
    if (own.unique_value !== current.unique_value) plan.uniqueSetBy.set(id, index)
    current.unique_value = own.unique_value
  }
}

/**
 * An asset named by several items: the runs one after the other, each as one update (its own
 * events, from the asset as the run before left it). A unique value may pass between assets
 * within a run (released first), and across runs in their order.
 */
async function writeRuns(tx: Tx, ctx: RequestContext, runs: readonly Map<string, AssetChange>[]): Promise<{ id: string }[]> {
  const written: { id: string }[] = []
  for (const run of runs) {
    const changes = [...run.values()]
    const releaseUnique = changes.filter((c) => c.set_unique).map((c) => c.id)
    pushAll(written, await updateAssets(tx, originOf(ctx), changes, { skipUnchanged: true, releaseUnique, answer: 'ids' }))
  }
  return written
}

/**
 * Checks every item in request order against the metamodel (the values it sets; clearing a
 * required property) and the key's roles on the asset as earlier items left it, then folds it
 * into its asset's change. Records every missing or invalid item (422) and every forbidden one
 * (403); only items that pass are folded.
 */
function applyItems(ctx: RequestContext, items: readonly BulkAssetPatch[], plan: Plan, missing: Issue[], failures: ItemFailures): void {
  const invalid = [...missing]
  const forbidden: Issue[] = []
  items.forEach((item, i) => {
    const id = plan.ids[i]
    if (id === null || id === undefined) return
    const current = plan.current.get(id)!
    const issues = item.properties === undefined ? [] : preparePropertiesPatch(ctx.metamodel, current.asset_type_key, item.properties, `/${i}`).issues
    if (item.asset_type_key !== undefined && item.asset_type_key !== current.asset_type_key) {
      issues.unshift({ detail: 'asset_type_key cannot change', pointer: `/${i}/asset_type_key` })
    }
    if (item.access_domain_key !== undefined) pushAll(issues, checkDomain(ctx.metamodel, item.access_domain_key, `/${i}/access_domain_key`))
    pushAll(invalid, issues)
    // One entry per failing item: an invalid one is not also reported as forbidden.
    const denied = issues.length === 0 ? forbiddenIssue(ctx, current, item, i) : null
    if (denied) forbidden.push(denied)
    if (issues.length === 0 && !denied) fold(ctx, plan, id, item, i)
  })
  failures.add(Errors.VALIDATION_FAILED, invalid)
  failures.add(Errors.FORBIDDEN, forbidden)
}

/**
 * Records a 409 for every item whose new unique value is given twice in the request or held by
 * another live asset that keeps it. Only changed values are looked up, so the usual bulk update
 * (no unique value touched) costs no statement here.
 */
async function checkUniqueValues(ctx: RequestContext, tx: Tx, plan: Plan, failures: ItemFailures): Promise<void> {
  const claims: UniqueClaim[] = []
  for (const [id, index] of plan.uniqueSetBy) {
    const row = plan.current.get(id)!
    if (row.unique_value !== null && row.unique_value !== plan.original.get(id)) {
      claims.push({ index, asset_type_key: row.asset_type_key, unique_value: row.unique_value })
    }
  }
  if (claims.length === 0) return
  claims.sort((a, b) => a.index - b.index)
  const pointer = (c: UniqueClaim) => `/${c.index}/properties/${ctx.metamodel.assetTypes.get(c.asset_type_key)?.unique_property_key ?? ''}`
  const issues: Issue[] = duplicateClaims(claims).map(({ claim, firstIndex }) => ({
    detail: `${claim.asset_type_key} ${claim.unique_value}: the same unique value is given by item ${firstIndex}`,
    pointer: pointer(claim),
  }))
  // Claims by value, so each holder finds its claimants without a scan of every claim.
  const claimsOf = new CompositeKeyMap<UniqueClaim[]>()
  for (const claim of claims) {
    const list = claimsOf.get(claim)
    if (list) list.push(claim)
    else claimsOf.set(claim.asset_type_key, claim.unique_value, [claim])
  }
  // The live assets holding any claimed value: one look-up by composite key.
  const keys = claims.map((c) => ({ asset_type_key: c.asset_type_key, unique_value: c.unique_value }))
  const holders = await selectAssetRefs(tx, ctx.auth.orgId, keys)
  // In id order, so that the clashes are listed the same way every time.
  holders.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  for (const holder of holders) {
    // A holder that gives its value up in this request is no clash.
    if ((plan.current.get(holder.id)?.unique_value ?? holder.unique_value) !== holder.unique_value) continue
    for (const claim of claimsOf.get(holder) ?? []) {
      if (plan.ids[claim.index] === holder.id) continue
      issues.push({ detail: `${claim.asset_type_key} ${claim.unique_value}: the unique value is already taken by another asset of this type`, pointer: pointer(claim) })
    }
  }
  failures.add(Errors.UNIQUE_VIOLATION, issues)
}

/** The embedded relationships to sync: those of the items `included` that carry any. */
function embeddedSyncs(items: readonly BulkAssetPatch[], plan: Plan, included: (index: number) => boolean): EmbeddedSync[] {
  return items.flatMap((item, i) =>
    !included(i) || item.relationships === undefined
      ? []
      : [{ asset: plan.current.get(plan.ids[i]!)!, relationships: item.relationships, pointer: `/${i}/relationships` }],
  )
}

/**
 * PATCH /bulk/assets, and PATCH /assets/{id} as a bulk update of one (`single`: a missing asset
 * is 404): one transaction of a handful of statements whatever the item count: lock and read the
 * targets, (look up changed unique values), one UPDATE merging every change in SQL, (sync
 * embedded relationships once for every item that carries them). Returns, per item, its asset
 * as it is now (`single`), or its id.
 */
export async function patchAssets(ctx: RequestContext, items: readonly BulkAssetPatch[], failures: ItemFailures | undefined, options: { single: true }): Promise<AssetRow[]>
export async function patchAssets(ctx: RequestContext, items: readonly BulkAssetPatch[], failures?: ItemFailures): Promise<{ id: string }[]>
export async function patchAssets(
  ctx: RequestContext,
  items: readonly BulkAssetPatch[],
  failures = new ItemFailures(),
  options: { single?: boolean } = {},
): Promise<(AssetRow | { id: string })[]> {
  return ctx.db.transaction(async (tx) => {
    // Every item goes through every check (a failed one is left out of the later ones), so that
    // a failing request lists every failing item; then nothing is kept.
    const { plan, missing } = await lockTargets(ctx, tx, items, failures.failed, options.single === true)
    applyItems(ctx, items, plan, missing, failures)
    await checkUniqueValues(ctx, tx, plan, failures)
    // Embedded relationships are synced on the patched assets. When items failed, those of the
    // others are checked still, before any patch is written (every failing item listed); an
    // asset that an item renames is not reported missing under its new key.
    if (failures.failed.size > 0) {
      const renamedKeys = items.flatMap((item, i) => {
        const asset = plan.ids[i] ? plan.current.get(plan.ids[i]!) : undefined
        const property = asset ? ctx.metamodel.assetTypes.get(asset.asset_type_key)?.unique_property_key : undefined
        const value = property ? item.properties?.[property] : undefined
        return asset && typeof value === 'string' ? [{ asset_type_key: asset.asset_type_key, unique_value: value }] : []
      })
      await checkBesideFailures(tx, ctx, embeddedSyncs(items, plan, (i) => !failures.failed.has(i)), failures, renamedKeys)
    }
    failures.throwIfAny()
    // A bulk answers ids; PATCH /assets/{id} its record. An asset the patch leaves as it is (the
    // same values) is not written: no updated_at change, as no event (CONTRACT §13).
    const answer = options.single === true ? 'rows' : 'ids'
    const updates = plan.runs.length === 1
      ? await updateAssets(tx, originOf(ctx), [...plan.patches.values()], { skipUnchanged: true, releaseUnique: [...plan.uniqueSetBy.keys()], answer })
      : await writeRuns(tx, ctx, plan.runs)
    const syncs = embeddedSyncs(items, plan, () => true)
    if (syncs.length > 0) await syncEmbeddedRelationships(tx, ctx, syncs)
    const byId = new Map<string, AssetRow | { id: string }>(updates.map((row) => [row.id, row]))
    if (options.single === true && !byId.has(plan.ids[0]!)) {
      byId.set(plan.ids[0]!, (await selectAssetsByKeys(tx, ctx.auth.orgId, [{ id: plan.ids[0]! }]))[0]!)
    }
    return items.map((_, i) => byId.get(plan.ids[i]!) ?? { id: plan.ids[i]! })
  })
}
