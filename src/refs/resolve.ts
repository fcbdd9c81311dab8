import type { RequestContext } from '../request/context.js'
import type { Queryable } from '../store/db.js'
import { hasLevel } from '../access/scope.js'
import { parseAssetRef, type AssetKey } from '../metamodel/refs.js'
import { selectAssetRefs, type AssetReference } from './sql.js'

/**
 * Values by composite key (asset type, unique value): a map per type, keyed by the unique value
 * as given, so that naming 10,000 assets builds no joined string per key (a bulk's look-up and
 * its items each name every asset once). Rows without a unique value are named by no key.
 */
export class CompositeKeyMap<V> {
  private readonly byType = new Map<string, Map<string, V>>()

  static of<R extends { asset_type_key: string; unique_value: string | null }>(rows: readonly R[]): CompositeKeyMap<R> {
    const map = new CompositeKeyMap<R>()
    for (const row of rows) if (row.unique_value !== null) map.set(row.asset_type_key, row.unique_value, row)
    return map
  }

  /** The value of a key; a row without a unique value is named by none (undefined). */
  get(key: { asset_type_key: string; unique_value: string | null }): V | undefined {
    return key.unique_value === null ? undefined : this.byType.get(key.asset_type_key)?.get(key.unique_value)
  }

  set(typeKey: string, uniqueValue: string, value: V): void {
    let values = this.byType.get(typeKey)
    if (!values) this.byType.set(typeKey, (values = new Map()))
    values.set(uniqueValue, value)
  }
}

/**
 * Resolves asset references (UUIDs or composite keys) with ONE statement for the whole batch.
 * The answer maps each reference text to its live asset, or to undefined when the reference
 * names nothing this key can see: unknown, archived and hidden assets look the same (CONTRACT §1,
 * never reveal existence).
 */
export async function resolveAssetRefs(ctx: RequestContext, db: Queryable, refs: Iterable<string>): Promise<Map<string, AssetReference | undefined>> {
  const parsed = new Map<string, AssetKey | null>()
  for (const ref of refs) if (!parsed.has(ref)) parsed.set(ref, parseAssetRef(ref, ctx.metamodel))
  const keys = [...parsed.values()].filter((k): k is AssetKey => k !== null)
  // Only what ends are checked on (id, type, domain, unique_value): a bulk request resolves up to
  // 20,000 references, and whole documents would cost more to ship and parse than the lookup.
  const rows = keys.length === 0 ? [] : await selectAssetRefs(db, ctx.auth.orgId, keys)
  // Maps, not a search per reference: a bulk request resolves up to 10,000 of them.
  const byId = new Map(rows.map((row) => [row.id, row]))
  const byComposite = CompositeKeyMap.of(rows)
  const resolved = new Map<string, AssetReference | undefined>()
  for (const [ref, key] of parsed) {
    const row = key === null ? undefined : 'id' in key ? byId.get(key.id) : byComposite.get(key)
    resolved.set(ref, row !== undefined && hasLevel(ctx.auth, row, 'view') ? row : undefined)
  }
  return resolved
}
