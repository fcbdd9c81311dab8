import type { AuthContext } from '../core/auth/context.js'
import type { FilterNode } from '../query/ast.js'
import type { CountMemo, CountOptions, Params } from '../store/sql.js'

/**
 * When an asset list may be counted from the live counters of migration 0008 (CONTRACT §1):
 * its conditions are the organization, liveness and at most one asset type, and the key's scope
 * cannot hide any of those assets. Anything else is counted by the capped `count(*)` of
 * `selectPage`, so scoped keys and filters still get correct figures.
 */

/**
 * The asset types a filter restricts to: `[]` for no filter at all, one key for a lone equality
 * on `asset_type_key`, `null` for anything else (the counters cannot answer it).
 *
 * @example typesOnly(null) → []   typesOnly({kind: 'condition', field: 'asset_type_key', operator: 'equals', value: 'server'}) → ['server']
 */
export function typesOnly(filter: FilterNode | null): string[] | null {
  if (filter === null) return []
  if (filter.kind === 'condition') {
    return filter.field === 'asset_type_key' && filter.operator === 'equals' && typeof filter.value === 'string' ? [filter.value] : null
  }
  if (filter.kind !== 'and') return null
  const types = new Set<string>()
  for (const child of filter.children) {
    const one = typesOnly(child)
    if (one === null) return null
    one.forEach((t) => types.add(t))
  }
  // Two different type equalities ANDed match nothing; the page itself says so.
  return types.size > 1 ? null : [...types]
}

/** Whether the key sees every live asset of these types (all types for `[]`) at level view. */
export function scopeSeesAll(auth: AuthContext, types: readonly string[]): boolean {
  const everywhere = auth.grants.filter((g) => g.access_domain_key === '*')
  if (everywhere.some((g) => g.asset_type_keys.includes('*'))) return true
  return types.length > 0 && types.every((t) => everywhere.some((g) => g.asset_type_keys.includes(t)))
}

/** The count options of an asset list: the live counters when they apply, else the request's remembered counts; the exact flag always. */
export function assetCountOptions(auth: AuthContext, filter: FilterNode | null, exact: boolean, memo?: CountMemo): CountOptions {
  const types = typesOnly(filter)
  if (types === null || !scopeSeesAll(auth, types)) return { exact, memo }
  return { exact, memo, live: (params) => liveAssetCountSql(params, auth.orgId, types) }
}

/** Live assets of the organization (of these types when given), from the counters: one index read, as a scalar subquery. */
export function liveAssetCountSql(params: Params, orgId: string, types: readonly string[]): string {
  const org = params.add(orgId)
  return types.length === 0
    ? `SELECT coalesce(sum(live), 0)::int FROM asset_counts WHERE org_id = ${org}`
    : `SELECT coalesce(sum(live), 0)::int FROM asset_counts WHERE org_id = ${org} AND asset_type_key = ANY(${params.add(types)}::text[])`
}
