import { AppError, Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Tx } from '../store/db.js'
import { hasLevel } from '../access/scope.js'
import { newId } from '../core/time.js'
import type { AssetReference } from '../refs/sql.js'
import { CompositeKeyMap, resolveAssetRefs } from '../refs/resolve.js'
import { parseAssetRef } from '../metamodel/refs.js'
import type { ItemFailures } from '../core/items.js'
import { cannotEdit, endAllows, endNotAllowed, type End } from './resolve.js'
import { deleteRelationships, insertRelationships, type NewRelationshipRow } from './sql.js'
import type { RelationshipRow } from './mapper.js'
import { escapePointer, isObject } from '../core/json.js'
import { selectReplacedRelationships, type Direction, type KeptRelated, type PairKey } from './embedded-sql.js'
import { originOf } from '../outbox/write.js'
import { pushAll } from '../core/arrays.js'

/** An asset named by type and unique value (null: it has none). */
export interface AssetKeyValue {
  asset_type_key: string
  unique_value: string | null
}

/** What a sync wrote: the relationships it created and those it deleted (as they were). */
export interface SyncResult {
  inserted: RelationshipRow[]
  deleted: RelationshipRow[]
}

export interface EmbeddedSync {
  /** What the sync reads of the asset: its id and type. */
  asset: { id: string; asset_type_key: string }
  relationships: unknown
  /** JSON pointer of the `relationships` member in the request body (bulk: `/3/relationships`). */
  pointer: string
}

interface SubmittedPair {
  item: EmbeddedSync
  direction: Direction
  typeKey: string
  pointer: string
  refs: { ref: string; pointer: string }[]
}

interface Plan {
  pairs: PairKey[]
  kept: KeptRelated[]
  rows: NewRelationshipRow[]
  /** Rows whose source the key may not edit (incoming pairs), by row key → the 403 issue. */
  uneditable: Map<string, Issue>
  issues: Issue[]
}

const DIRECTIONS: readonly Direction[] = ['outgoing', 'incoming']

/**
 * Replaces each submitted (direction, type) pair of each asset by exactly the submitted set
 * (spec "Embedded relationship sync rules"): `[]` removes every relationship of the pair, pairs
 * not sent are untouched. Runs inside the caller's transaction and is set-based whatever the
 * number of items (bulk sends up to 10,000): one lookup of every related asset, one DELETE, one
 * INSERT. Any invalid or forbidden pair throws (422 before 403, both listed in one error), and
 * the caller's transaction (the asset write included) rolls back: nothing changes. The caller
 * has checked `edit` on each asset; incoming pairs also need `edit` on the related asset (it is
 * the source). `excused`: references whose asset may be missing without it being the pair's
 * fault (checkBesideFailures); by default every missing one is reported.
 *
 * @example relationships: {"outgoing": {"runs_on": {"related_assets": [{"id": "server:hostname:web-01"}]}}}
 */
export async function syncEmbeddedRelationships(tx: Tx, ctx: RequestContext, items: EmbeddedSync[], excused: (ref: string) => boolean = () => false): Promise<SyncResult> {
  const issues: Issue[] = []
  const all = items.flatMap((item) => readPairs(item, issues))
  const assets = await resolveAssetRefs(ctx, tx, all.flatMap((pair) => pair.refs.map((r) => r.ref)))
  // Every submitted pair is checked; only the last one given for each (asset, direction, type) is written.
  const checked = planSync(ctx, all, assets, excused)
  pushAll(issues, checked.issues)
  // Items with invalid pairs are left out of the write, which still runs for the others so that
  // their 403s are found too: one answer lists every failing item (the caller's transaction
  // rolls back whenever this throws).
  const byPointer = new Map(items.map((item) => [item.pointer, item]))
  // Every issue points into its item's `relationships` member (`/3/relationships/…`).
  const invalid = new Set(issues.flatMap((issue) => byPointer.get(/^(.*?\/relationships)(?=\/|$)/.exec(issue.pointer ?? '')?.[1] ?? '') ?? []))
  const submitted = latestPerPair(all).filter((pair) => !invalid.has(pair.item))
  const plan = orderAcrossEnds(submitted.length === all.length ? checked : planSync(ctx, submitted, assets, excused), submitted)
  // A relationship both of whose ends' pairs leave it out is found once per pair: deleted once.
  const removed = [...new Map((await selectReplacedRelationships(tx, ctx.auth, plan.pairs, plan.kept)).map((r) => [r.id, r])).values()]
  const forbidden = forbiddenRemovals(removed.filter((r) => !r.editable), submitted)
  const deleted = await deleteRelationships(tx, originOf(ctx), removed.map((r) => r.id))
  // Relationships that exist already are kept as they are (id and created_at unchanged).
  const inserted = await insertRelationships(tx, ctx, plan.rows)
  // Only relationships that are really new need edit on their source; existing ones are kept as is.
  pushAll(forbidden, inserted.flatMap((row) => plan.uneditable.get(rowKey(row)) ?? []))
  if (issues.length > 0 || forbidden.length > 0) {
    const marked = forbidden.map((issue) => ({ ...issue, def: Errors.FORBIDDEN }))
    throw new AppError(issues.length > 0 ? Errors.VALIDATION_FAILED : Errors.FORBIDDEN, [...issues, ...(issues.length > 0 ? marked : forbidden)])
  }
  return { inserted, deleted }
}

/**
 * When other items of a request failed already: the embedded relationships of the items that
 * passed are checked still (their failures join `failures`), so that one answer lists every
 * failing item (CONTRACT §5). The sync runs as it would, in the caller's transaction, which the
 * failures then roll back. A related asset named by the composite key of a failed item
 * (`failedKeys`: the asset it would create or rename) is missing only because that item failed:
 * it is not reported (its pair shows on the next try, as before).
 */
export async function checkBesideFailures(tx: Tx, ctx: RequestContext, items: EmbeddedSync[], failures: ItemFailures, failedKeys: readonly AssetKeyValue[]): Promise<void> {
  if (items.length === 0) return
  const failed = new CompositeKeyMap<true>()
  for (const key of failedKeys) if (key.unique_value !== null) failed.set(key.asset_type_key, key.unique_value, true)
  const excused = (ref: string): boolean => {
    const key = parseAssetRef(ref, ctx.metamodel)
    return key !== null && !('id' in key) && failed.get(key) === true
  }
  try {
    await syncEmbeddedRelationships(tx, ctx, items, excused)
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    failures.addError(err)
  }
}

const pairKey = (assetId: string, direction: Direction, typeKey: string): string => `${assetId}\u0000${direction}\u0000${typeKey}`

/**
 * Items apply in order (bulk PATCH may name one asset twice): when several give the same
 * (asset, direction, type) pair, the last one's set replaces the pair, the earlier ones are dropped.
 */
function latestPerPair(pairs: SubmittedPair[]): SubmittedPair[] {
  const last = new Map(pairs.map((pair, i) => [pairKey(pair.item.asset.id, pair.direction, pair.typeKey), i]))
  return pairs.filter((pair, i) => last.get(pairKey(pair.item.asset.id, pair.direction, pair.typeKey)) === i)
}

const OPPOSITE: Readonly<Record<Direction, Direction>> = { outgoing: 'incoming', incoming: 'outgoing' }

/**
 * Items apply in order across the two ends of a relationship too: when one item replaces a pair
 * of its source (outgoing) and a later one the matching pair of its target (incoming), or one item
 * both pairs of a self-relationship, the pair given last decides whether the relationship is
 * there. One it leaves out is neither kept nor created by the earlier pair; one it names is kept
 * by the earlier pair too (not deleted and created again). `submitted` is in request order.
 */
function orderAcrossEnds(plan: Plan, submitted: SubmittedPair[]): Plan {
  const order = new Map(submitted.map((pair, i) => [pairKey(pair.item.asset.id, pair.direction, pair.typeKey), i]))
  const named = new Map<string, Set<string>>()
  for (const k of plan.kept) {
    const key = pairKey(k.asset_id, k.direction, k.relationship_type_key)
    named.set(key, (named.get(key) ?? new Set()).add(k.related_id))
  }
  const otherEnd = (k: KeptRelated): string => pairKey(k.related_id, OPPOSITE[k.direction], k.relationship_type_key)
  const later = (k: KeptRelated): boolean => (order.get(otherEnd(k)) ?? -1) > (order.get(pairKey(k.asset_id, k.direction, k.relationship_type_key)) ?? -1)
  // Left out by a later pair of the other end: gone.
  const dropped = plan.kept.filter((k) => later(k) && !named.get(otherEnd(k))?.has(k.asset_id))
  if (dropped.length === 0 && !plan.kept.some((k) => order.has(otherEnd(k)))) return plan
  const edge = (k: KeptRelated): string => (k.direction === 'outgoing'
    ? rowKey({ relationship_type_key: k.relationship_type_key, source_asset_id: k.asset_id, target_asset_id: k.related_id })
    : rowKey({ relationship_type_key: k.relationship_type_key, source_asset_id: k.related_id, target_asset_id: k.asset_id }))
  const gone = new Set(dropped.map(edge))
  const kept = plan.kept.filter((k) => !gone.has(edge(k)))
  // Named by a later pair after an earlier pair of the other end left it out: the earlier one keeps it.
  const keptToo = kept.filter((k) => !later(k) && order.has(otherEnd(k)) && !named.get(otherEnd(k))?.has(k.asset_id))
    .map((k): KeptRelated => ({ asset_id: k.related_id, direction: OPPOSITE[k.direction], relationship_type_key: k.relationship_type_key, related_id: k.asset_id }))
  return { ...plan, kept: [...kept, ...keptToo], rows: plan.rows.filter((row) => !gone.has(rowKey(row))) }
}

/** Reads the body shape (the route schemas check it too; bulk items may arrive unchecked). */
function readPairs(item: EmbeddedSync, issues: Issue[]): SubmittedPair[] {
  const bad = (pointer: string, detail: string): [] => {
    issues.push({ detail, pointer })
    return []
  }
  if (!isObject(item.relationships)) return bad(item.pointer, 'relationships must be an object with "outgoing" and/or "incoming"')
  const body = item.relationships
  return DIRECTIONS.flatMap((direction) => {
    const byType = body[direction]
    if (byType === undefined) return []
    if (!isObject(byType)) return bad(`${item.pointer}/${direction}`, `${direction} must be an object keyed by relationship type`)
    return Object.entries(byType).flatMap(([typeKey, group]): SubmittedPair[] => {
      const pointer = `${item.pointer}/${direction}/${escapePointer(typeKey)}`
      const list = isObject(group) ? group.related_assets : undefined
      if (!Array.isArray(list)) return bad(pointer, 'each relationship type holds {"related_assets": [{"id": "..."}]}')
      const refs = list.flatMap((entry: unknown, i) => {
        const id = isObject(entry) ? entry.id : undefined
        return typeof id === 'string' && id !== '' ? [{ ref: id, pointer: `${pointer}/related_assets/${i}/id` }] : bad(`${pointer}/related_assets/${i}`, 'a related asset is {"id": "<UUID or composite key>"}')
      })
      return [{ item, direction, typeKey, pointer, refs }]
    })
  })
}

/** `excused`: references whose asset may be missing without it being this pair's fault (checkBesideFailures). */
function planSync(ctx: RequestContext, submitted: SubmittedPair[], assets: Map<string, AssetReference | undefined>, excused: (ref: string) => boolean): Plan {
  const plan: Plan = { pairs: [], kept: [], rows: [], uneditable: new Map(), issues: [] }
  for (const pair of submitted) {
    const { item, direction, typeKey } = pair
    const issue = (pointer: string, detail: string): void => {
      plan.issues.push({ detail, pointer })
    }
    const type = ctx.metamodel.relationshipTypes.get(typeKey)
    if (!type) {
      issue(pair.pointer, `unknown relationship type ${typeKey}`)
      continue
    }
    const ownEnd: End = direction === 'outgoing' ? 'source' : 'target'
    const relatedEnd: End = direction === 'outgoing' ? 'target' : 'source'
    if (pair.refs.length > 0 && !endAllows(type, ownEnd, item.asset.asset_type_key)) issue(pair.pointer, endNotAllowed(type, ownEnd, item.asset.asset_type_key))
    plan.pairs.push({ asset_id: item.asset.id, direction, relationship_type_key: type.key })
    const seen = new Set<string>()
    for (const { ref, pointer } of pair.refs) {
      const related = assets.get(ref)
      if (!related) {
        if (!excused(ref)) issue(pointer, `related asset ${ref} not found`)
      } else if (!endAllows(type, relatedEnd, related.asset_type_key)) issue(pointer, endNotAllowed(type, relatedEnd, related.asset_type_key))
      // The same asset named twice (say by UUID and by composite key) is one relationship.
      if (!related || seen.has(related.id)) continue
      seen.add(related.id)
      plan.kept.push({ asset_id: item.asset.id, direction, relationship_type_key: type.key, related_id: related.id })
      const [source, target] = direction === 'outgoing' ? [item.asset, related] : [related, item.asset]
      const row = { id: newId(), relationship_type_key: type.key, source_asset_id: source.id, target_asset_id: target.id }
      plan.rows.push(row)
      if (direction === 'incoming' && !hasLevel(ctx.auth, related, 'edit')) {
        plan.uneditable.set(rowKey(row), { detail: cannotEdit(related), pointer })
      }
    }
  }
  return plan
}

function rowKey(row: { relationship_type_key: string; source_asset_id: string; target_asset_id: string }): string {
  return `${row.relationship_type_key}\u0000${row.source_asset_id}\u0000${row.target_asset_id}`
}

/** The 403 issues of removals the key may not make, each on the item (and pair) that asked for it. */
function forbiddenRemovals(removed: { asset_id: string; direction: Direction; relationship_type_key: string; related_id: string }[], submitted: SubmittedPair[]): Issue[] {
  const byPair = new Map(submitted.map((pair) => [pairKey(pair.item.asset.id, pair.direction, pair.typeKey), pair]))
  return removed.map((r) => {
    const pair = byPair.get(pairKey(r.asset_id, r.direction, r.relationship_type_key))
    return {
      detail: `the incoming ${r.relationship_type_key} relationship from asset ${r.related_id} cannot be removed: the key may not edit that asset, its source`,
      pointer: pair?.pointer ?? `/relationships/incoming/${escapePointer(r.relationship_type_key)}`,
    }
  })
}
