import { AppError, Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import { parseAssetRef } from '../metamodel/refs.js'
import { selectAssetRefs, type AssetReference } from '../refs/sql.js'
import { CompositeKeyMap } from '../refs/resolve.js'
import { checkBesideFailures, syncEmbeddedRelationships } from '../relationships/embedded.js'
import { ItemFailures, type BulkItem } from '../core/items.js'
import { checkDomain, prepareAssetValues, prepareNewAsset, preparePropertiesPatch } from './prepare.js'
import { insertAssets, selectAssetsByKeys, selectReplaced, updateAssets, type AssetChange, type NewAssetRow, type ReplacedAsset } from './sql.js'
import { jsonbMatches } from '../store/jsonb-text.js'
import { inUniqueOrder } from './create.js'
import type { AssetRow } from './mapper.js'
import type { Tx } from '../store/db.js'
import { originOf } from '../outbox/write.js'
import { TransientConflict } from '../store/retry.js'
import { pushAll } from '../core/arrays.js'

/** A PUT /bulk/assets item; PUT /assets/{composite key} is one such item (`id` from the path). */
export interface UpsertItem extends BulkItem {
  /** The composite key `type:unique_property:value` naming the asset. */
  id: string
  asset_type_key?: string
  name: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
  relationships?: unknown
}

export type UpsertResult = 'created' | 'updated' | 'unchanged'

/** An updated row as updateAssets answered it: whole (`'rows'`), or its id alone (`'ids'`). */
function isWhole(row: AssetRow | { id: string }): row is AssetRow {
  return 'properties' in row
}

export interface UpsertOutcome {
  id: string
  result: UpsertResult
  /** The asset as it is now, only with `options.single` (an `unchanged` one read back for the answer). */
  row?: AssetRow
}

interface Key {
  asset_type_key: string
  unique_value: string
  unique_property_key: string
}

/** The item's composite key, or null when it names no asset type with a unique key. */
function keyOf(ctx: RequestContext, ref: unknown): Key | null {
  const key = typeof ref === 'string' ? parseAssetRef(ref, ctx.metamodel) : null
  if (!key || 'id' in key) return null
  return { asset_type_key: key.asset_type_key, unique_value: key.unique_value, unique_property_key: ctx.metamodel.assetTypes.get(key.asset_type_key)!.unique_property_key! }
}

/** The access rules of changing `current` to the domain `domain`; null when allowed. */
function forbiddenChange(ctx: RequestContext, current: AssetReference, domain: string | null, index: number): Issue | null {
  if (!hasLevel(ctx.auth, current, 'edit')) {
    return { detail: `the key's roles do not allow to change ${current.asset_type_key} assets in ${describeDomain(current.access_domain_key)}`, pointer: `/${index}` }
  }
  if (domain === current.access_domain_key) return null
  const moved = { ...current, access_domain_key: domain }
  if (hasLevel(ctx.auth, current, 'edit_access_domain') && hasLevel(ctx.auth, moved, 'edit_access_domain')) return null
  return { detail: 'moving an asset to another access domain needs edit_access_domain on both domains', pointer: `/${index}/access_domain_key` }
}

interface Plan {
  creates: { index: number; row: NewAssetRow }[]
  /** The assets to UPDATE: replacing, not those whose look-up shows the new values already. */
  changes: { index: number; change: AssetChange }[]
  /** The asset id per item (created ones once their rows are prepared). */
  ids: (string | null)[]
}

/**
 * Checks every item (key, type, values, access) against the assets its keys name, recording
 * every failure, and sorts the valid ones into creations and changes.
 */
function planItems(ctx: RequestContext, items: readonly UpsertItem[], keys: (Key | null)[], stored: CompositeKeyMap<AssetReference>, merge: boolean, failures: ItemFailures): Plan {
  const plan: Plan = { creates: [], changes: [], ids: items.map(() => null) }
  const invalid: Issue[] = []
  const forbidden: Issue[] = []
  const clashes: Issue[] = []
  const firstIndex = new CompositeKeyMap<number>()
  items.forEach((item, i) => {
    const key = keys[i]
    if (failures.failed.has(i)) return
    if (!key) {
      invalid.push({ detail: `${item.id} is not a composite key type:unique_property:value of an asset type with a unique key`, pointer: `/${i}/id` })
      return
    }
    const first = firstIndex.get(key)
    if (first !== undefined) {
      clashes.push({ detail: `${key.asset_type_key} ${key.unique_value}: the same asset is given by item ${first}`, pointer: `/${i}/id` })
      return
    }
    firstIndex.set(key.asset_type_key, key.unique_value, i)
    const issues: Issue[] = []
    if (item.asset_type_key !== undefined && item.asset_type_key !== key.asset_type_key) {
      issues.push({ detail: `asset_type_key must be ${key.asset_type_key}, the type of the key`, pointer: `/${i}/asset_type_key` })
    }
    const properties = item.properties ?? {}
    const given = properties[key.unique_property_key]
    if (given !== undefined && given !== key.unique_value) {
      issues.push({ detail: `${key.unique_property_key} must be ${key.unique_value}, the value of the key`, pointer: `/${i}/properties/${key.unique_property_key}` })
    }
    // The key's value stands in the properties (as a re-sent record has it), or is added to a copy.
    const withKey = given === key.unique_value ? properties : { ...properties, [key.unique_property_key]: key.unique_value }
    const current = stored.get(key)
    if (!current || !hasLevel(ctx.auth, current, 'view')) {
      // Created; an asset the key cannot see holding this key makes the insert clash (409).
      const prepared = prepareNewAsset(ctx.metamodel, { asset_type_key: key.asset_type_key, name: item.name, access_domain_key: item.access_domain_key ?? null, properties: withKey }, `/${i}`)
      pushAll(issues, prepared.issues)
      pushAll(invalid, issues)
      if (issues.length > 0) return
      if (!hasLevel(ctx.auth, prepared.row, 'edit')) {
        forbidden.push({ detail: `the key's roles do not allow to create ${key.asset_type_key} assets in ${describeDomain(prepared.row.access_domain_key)}`, pointer: `/${i}` })
        return
      }
      plan.creates.push({ index: i, row: prepared.row })
      plan.ids[i] = prepared.row.id
      return
    }
    // Replacing with the values the asset holds already (name, access domain, properties by their
    // stored fingerprint): unchanged, and nothing to validate. Those values fit the metamodel, as
    // every live asset's do (each write is checked; kbis apply refuses a change that live assets
    // contradict), so the checks below would pass: only the access one is left. This is a nightly
    // sync's usual item, and its validation was the largest part of its cost outside SQL.
    if (!merge && issues.length === 0 && holdsAlready(current as ReplacedAsset, item.name, item.access_domain_key ?? null, withKey)) {
      const denied = forbiddenChange(ctx, current, current.access_domain_key, i)
      if (denied) forbidden.push(denied)
      else plan.ids[i] = current.id
      return
    }
    let change: AssetChange
    if (merge) {
      // As PATCH: properties merge key by key (null clears), an omitted access domain is kept.
      const patch = preparePropertiesPatch(ctx.metamodel, key.asset_type_key, withKey, `/${i}`)
      pushAll(issues, patch.issues)
      const domain = item.access_domain_key === undefined ? current.access_domain_key : item.access_domain_key
      if (item.access_domain_key !== undefined) pushAll(issues, checkDomain(ctx.metamodel, domain, `/${i}/access_domain_key`))
      change = { id: current.id, name: item.name, set_domain: true, access_domain_key: domain, replace: false, props: patch.set, cleared: patch.clear, set_unique: false, unique_value: null }
    } else {
      // Replace: what is not sent is cleared, as if the asset were created anew.
      const prepared = prepareAssetValues(ctx.metamodel, { asset_type_key: key.asset_type_key, name: item.name, access_domain_key: item.access_domain_key ?? null, properties: withKey }, `/${i}`)
      pushAll(issues, prepared.issues)
      const { values } = prepared
      change = { id: current.id, name: values.name, set_domain: true, access_domain_key: values.access_domain_key, replace: true, props: values.properties, cleared: [], set_unique: false, unique_value: null }
    }
    pushAll(invalid, issues)
    if (issues.length > 0) return
    const denied = forbiddenChange(ctx, current, change.access_domain_key, i)
    if (denied) {
      forbidden.push(denied)
      return
    }
    plan.ids[i] = current.id
    // One that matches only once its nulls are dropped (a property sent as null is no value) is
    // unchanged too, left out of the UPDATE; without nulls the properties are the ones compared above.
    if (!merge && change.props !== withKey && holdsAlready(current as ReplacedAsset, change.name, change.access_domain_key, change.props)) return
    plan.changes.push({ index: i, change })
  })
  failures.add(Errors.VALIDATION_FAILED, invalid)
  failures.add(Errors.FORBIDDEN, forbidden)
  failures.add(Errors.UNIQUE_VIOLATION, clashes)
  return plan
}

/**
 * Whether a stored asset holds a replacement's values already: name, access domain, and
 * properties by the fingerprint the look-up answered (selectReplaced).
 */
function holdsAlready(stored: ReplacedAsset, name: string | null, domain: string | null, properties: Record<string, unknown>): boolean {
  return stored.name === name && stored.access_domain_key === domain && jsonbMatches(stored.fingerprint, properties)
}

/**
 * Replacing, the look-up locks nothing: a nightly sync's unchanged assets are only read. The
 * assets about to be written are locked now (in id order, as `changes` comes), and must still be
 * as the look-up found them — live, with the same unique value and access domain, which named
 * them and decided the access checks — or the whole request runs again from a new look-up. Once
 * they are locked, the UPDATE (a statement of its own, whose snapshot is taken after the locks)
 * compares with the values they hold now, and its events change from those: two replacing
 * upserts of one asset no longer both change it from the value both had read, nor does one call
 * itself unchanged against a value another has replaced meanwhile. PGlite runs one transaction
 * at a time: nothing commits between its look-up and its UPDATE.
 */
async function lockAsFound(tx: Tx, orgId: string, changes: readonly AssetChange[], found: readonly AssetReference[]): Promise<void> {
  if (changes.length === 0 || tx.kind !== 'postgres') return
  const locked = new Map((await selectAssetRefs(tx, orgId, changes.map((c) => ({ id: c.id })), true)).map((row) => [row.id, row]))
  const before = new Map(found.map((row) => [row.id, row]))
  const moved = changes.some(({ id }) => {
    const [was, now] = [before.get(id)!, locked.get(id)]
    return now === undefined || now.unique_value !== was.unique_value || now.access_domain_key !== was.access_domain_key
  })
  if (moved) throw new TransientConflict('an asset of this request was archived, renamed or moved while it was looked up')
}

/**
 * PUT /bulk/assets, and PUT /assets/{composite key} as an upsert of one (`single`: a path that
 * is no composite key is 404). Per item: create the asset its key names, or replace (`merge`:
 * merge into) the stored one. One transaction of a handful of statements whatever the count:
 * one look-up of every key (locked with `merge`, whose new values depend on the stored ones;
 * replacing, with what tells the assets that hold their new values already, selectReplaced),
 * one INSERT of the new assets, one UPDATE of the others that skips, in SQL, every asset whose
 * values would stay as they are: an unchanged asset is not written (no `updated_at` change, no
 * event) and costs only its read. All or nothing, every failing item listed (CONTRACT §16).
 */
export async function upsertAssets(
  ctx: RequestContext,
  items: readonly UpsertItem[],
  given = new ItemFailures(),
  options: { merge?: boolean; single?: boolean } = {},
): Promise<UpsertOutcome[]> {
  const merge = options.merge === true
  const keys = items.map((item, i) => (given.failed.has(i) ? null : keyOf(ctx, item.id)))
  if (options.single && keys[0] === null && !given.failed.has(0)) {
    // The same answer whether or not such an asset exists: a 404 reveals nothing.
    throw new AppError(Errors.NOT_FOUND, `asset ${items[0]!.id} not found: PUT names an asset by its composite key type:unique_property:value ` +
      '(to change an asset by its id, PATCH /assets/{id})')
  }
  return ctx.db.transaction(async (tx) => {
    // An attempt that runs again (a concurrent creation, below) starts from the body's own failures.
    const failures = given.copy()
    const named = keys.filter((k): k is Key => k !== null)
    // Merging, the look-up locks the rows (the new values depend on the stored ones); replacing,
    // it answers what tells the assets that hold their new values already (below).
    const rows: AssetReference[] = merge ? await selectAssetRefs(tx, ctx.auth.orgId, named, true) : await selectReplaced(tx, ctx.auth.orgId, named)
    const stored = CompositeKeyMap.of(rows)
    const plan = planItems(ctx, items, keys, stored, merge, failures)
    const created = new Map((await insertAssets(tx, originOf(ctx), inUniqueOrder(plan.creates.map((c) => c.row)))).map((row) => [row.id, row]))
    if (created.size < plan.creates.length) {
      const skipped = plan.creates.filter((c) => !created.has(c.row.id))
      // A key the look-up found free, taken since by a write that committed (a concurrent upsert
      // of the same key): the whole request runs again and finds that asset to replace or leave
      // as it is (CONTRACT §1: a transient conflict is retried, never answered). A key held by
      // an asset this key cannot see stays a 409.
      if (skipped.some((c) => stored.get(keys[c.index]!) === undefined)) throw new TransientConflict('a concurrent write created an asset of this request')
      failures.add(Errors.UNIQUE_VIOLATION, skipped.map((c) => ({
        detail: `${c.row.asset_type_key} ${c.row.unique_value}: the unique value is already taken by another asset of this type`,
        pointer: options.single ? '/0' : `/${c.index}/id`,
      })))
    }
    const syncs = items.flatMap((item, i) => {
      const key = keys[i]!
      return failures.failed.has(i) || item.relationships === undefined ? [] : [{ asset: { id: plan.ids[i]!, asset_type_key: key.asset_type_key }, relationships: item.relationships, pointer: `/${i}/relationships` }]
    })
    if (failures.failed.size > 0) {
      // The relationships of the items that passed are checked too (every failing item listed);
      // an asset that a failed item would have created is not reported missing.
      await checkBesideFailures(tx, ctx, syncs, failures, [...failures.failed].flatMap((i) => keys[i] ?? []))
    }
    failures.throwIfAny()
    // A bulk answers ids and results; PUT /assets/{key} its record. The UPDATE compares the
    // changes left in SQL too (a fingerprint that does not match only means "compare").
    // In id order: the UPDATE locks its rows as it goes, so concurrent upserts of the same assets
    // (the look-up of a replacing one locks nothing) queue instead of deadlocking, as locking
    // look-ups (refs/sql.ts) order theirs.
    const changes = plan.changes.map((c) => c.change).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    if (!merge) await lockAsFound(tx, ctx.auth.orgId, changes, rows)
    const changed = await updateAssets(tx, originOf(ctx), changes, { skipUnchanged: true, answer: options.single === true ? 'rows' : 'ids' })
    const updated = new Map<string, AssetRow | { id: string }>(changed.map((row) => [row.id, row]))
    // An item whose relationships the sync changed is `updated`, not `unchanged` (which promises
    // no write and no event), though its own row is not written.
    const relinked = new Set<string>()
    if (syncs.length > 0) {
      const synced = await syncEmbeddedRelationships(tx, ctx, syncs)
      for (const r of [...synced.inserted, ...synced.deleted]) relinked.add(r.source_asset_id).add(r.target_asset_id)
    }
    const outcomes = plan.ids.map((id, i): UpsertOutcome => {
      const row = created.get(id!) ?? updated.get(id!)
      const result = created.has(id!) ? 'created' : updated.has(id!) || (items[i]!.relationships !== undefined && relinked.has(id!)) ? 'updated' : 'unchanged'
      return row !== undefined && isWhole(row) ? { id: id!, result, row } : { id: id!, result }
    })
    if (options.single && outcomes[0]!.row === undefined) {
      outcomes[0]!.row = (await selectAssetsByKeys(tx, ctx.auth.orgId, [{ id: outcomes[0]!.id }]))[0]
    }
    return outcomes
  })
}
