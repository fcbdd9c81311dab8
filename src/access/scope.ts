import type { Params } from '../store/sql.js'
import type { AuthContext } from '../core/auth/context.js'
import { levelRank, type Grant, type Level } from './levels.js'

/** The grants of a key that reach `level`; a Viewer key never gets past `view`. */
function grantsAtLeast(auth: AuthContext, level: Level): Grant[] {
  if (auth.permission === 'Viewer' && level !== 'view') return []
  return auth.grants.filter((g) => levelRank(g.level) >= levelRank(level))
}

function grantCoversAll(grant: Grant): boolean {
  return grant.access_domain_key === '*' && grant.asset_type_keys.includes('*')
}

/**
 * The SQL condition under which an asset (alias `a`) is reachable at `level` for this key, or
 * `TRUE` when a grant covers everything. It is ANDed into the same statement as the request's own
 * conditions, so hidden rows never leave the database.
 *
 * @example grants [{access_domain_key: 'it', asset_type_keys: ['*'], level: 'delete'}]
 *   scopeCondition(auth, 'a', 'view', params) → `(a.access_domain_key = $1)`, values ['it']
 */
export function scopeCondition(auth: AuthContext, alias: string, level: Level, params: Params): string {
  const grants = grantsAtLeast(auth, level)
  if (grants.some(grantCoversAll)) return 'TRUE'
  if (grants.length === 0) return 'FALSE'
  const parts = grants.map((g) => {
    const conds: string[] = []
    if (g.access_domain_key === null) conds.push(`${alias}.access_domain_key IS NULL`)
    else if (g.access_domain_key !== '*') conds.push(`${alias}.access_domain_key = ${params.add(g.access_domain_key)}`)
    if (!g.asset_type_keys.includes('*')) conds.push(`${alias}.asset_type_key = ANY(${params.add(g.asset_type_keys)}::text[])`)
    return conds.length === 0 ? 'TRUE' : conds.join(' AND ')
  })
  return `(${parts.map((p) => `(${p})`).join(' OR ')})`
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
