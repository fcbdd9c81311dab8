import type { RequestContext } from '../request/context.js'
import type { Queryable } from '../store/db.js'
import { hasLevel } from '../access/scope.js'
import { parseAssetRef, type AssetKey } from '../metamodel/refs.js'
import { selectAssetRefs, type AssetReference } from './sql.js'

/** Map key of a composite key (type, unique value): no string per ref beyond this one. */
export function compositeKey(typeKey: string, value: string | null | undefined): string {
  return `${typeKey}\u0000${value ?? ''}`
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
  const byComposite = new Map(rows.map((row) => [compositeKey(row.asset_type_key, row.unique_value), row]))
  const resolved = new Map<string, AssetReference | undefined>()
  for (const [ref, key] of parsed) {
    const row = key === null ? undefined : 'id' in key ? byId.get(key.id) : byComposite.get(compositeKey(key.asset_type_key, key.unique_value))
    resolved.set(ref, row !== undefined && hasLevel(ctx.auth, row, 'view') ? row : undefined)
  }
  return resolved
}
