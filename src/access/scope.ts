import type { Params } from '../store/sql.js'
import type { AuthContext } from '../core/auth/context.js'
import { compileFilter } from '../query/compile.js'
import { columnField, type ColumnField } from '../query/fields.js'
import { MATCH_ALL, MATCH_NONE, type ResolvedCondition, type ResolvedNode } from '../query/resolve.js'
import { levelRank, type Grant, type Level } from '../core/auth/levels.js'

/** The grants of a key that reach `level`; a Viewer key never gets past `view`. */
function grantsAtLeast(auth: AuthContext, level: Level): Grant[] {
  if (auth.permission === 'Viewer' && level !== 'view') return []
  return auth.grants.filter((g) => levelRank(g.level) >= levelRank(level))
}

function grantCoversAll(grant: Grant): boolean {
  return grant.access_domain_key === '*' && grant.asset_type_keys.includes('*')
}

const DOMAIN = columnField('assets', 'access_domain_key') as ColumnField
const TYPE = columnField('assets', 'asset_type_key') as ColumnField

function condition(field: ColumnField, operator: ResolvedCondition['operator'], value: ResolvedCondition['value']): ResolvedCondition {
  return Object.freeze({ kind: 'condition', field, operator, value })
}

/**
 * The assets this key reaches at `level`, as a filter node over an asset row (CONTRACT §9): one
 * `or` branch per grant, {@link MATCH_ALL} when a grant covers everything, {@link MATCH_NONE}
 * without grants. `compileWhere` (src/query/where.ts) ANDs it into the statement of the request,
 * so hidden rows never leave the database.
 *
 * @example grants [{access_domain_key: 'it', asset_type_keys: ['*'], level: 'delete'}, {access_domain_key: null, asset_type_keys: ['note'], level: 'view'}]
 *   scopeFilter(auth, 'view') compiles to
 *   (a."access_domain_key" = $1 OR ((a."access_domain_key" IS NULL OR a."access_domain_key" = '') AND a."asset_type_key" = ANY($2::text[])))
 */
export function scopeFilter(auth: AuthContext, level: Level): ResolvedNode {
  const grants = grantsAtLeast(auth, level)
  if (grants.some(grantCoversAll)) return MATCH_ALL
  if (grants.length === 0) return MATCH_NONE
  const branches = grants.map((g): ResolvedNode => {
    const conds: ResolvedCondition[] = []
    // Domain keys are never "": is_empty on the domain is "no access domain".
    if (g.access_domain_key === null) conds.push(condition(DOMAIN, 'is_empty', { kind: 'none' }))
    else if (g.access_domain_key !== '*') conds.push(condition(DOMAIN, 'equals', { kind: 'scalar', value: g.access_domain_key }))
    if (!g.asset_type_keys.includes('*')) conds.push(condition(TYPE, 'in', { kind: 'list', values: Object.freeze([...g.asset_type_keys]) }))
    return Object.freeze({ kind: 'and', children: Object.freeze(conds) })
  })
  return Object.freeze({ kind: 'or', children: Object.freeze(branches) })
}

/**
 * The scope compiled over the asset row `alias`, for statements that reach assets other than
 * through `compileWhere` (included and embedded relationships, the checked relationship insert,
 * analytics' related types). `TRUE` when the key sees everything: ANDing it costs nothing (the
 * planner folds it).
 */
export function scopeCondition(auth: AuthContext, alias: string, level: Level, params: Params): string {
  return compileFilter(scopeFilter(auth, level), params, alias)
}

/** The highest level this key has on one asset, or null when the asset is hidden from it. */
export function levelOn(auth: AuthContext, asset: { access_domain_key: string | null; asset_type_key: string }): Level | null {
  let best: Level | null = null
  for (const g of auth.grants) {
    const domainOk = g.access_domain_key === '*' || g.access_domain_key === asset.access_domain_key
    const typeOk = g.asset_type_keys.includes('*') || g.asset_type_keys.includes(asset.asset_type_key)
    if (domainOk && typeOk && (best === null || levelRank(g.level) > levelRank(best))) best = g.level
  }
  if (best !== null && auth.permission === 'Viewer') return 'view'
  return best
}

export function hasLevel(auth: AuthContext, asset: { access_domain_key: string | null; asset_type_key: string }, level: Level): boolean {
  const have = levelOn(auth, asset)
  return have !== null && levelRank(have) >= levelRank(level)
}

/** How errors name an asset's access domain: `access domain it`, or `no access domain`. */
export function describeDomain(domain: string | null): string {
  return domain === null ? 'no access domain' : `access domain ${domain}`
}
