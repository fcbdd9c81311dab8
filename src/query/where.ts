import type { Params } from '../store/sql.js'
import { JSONB_STORAGE, checkAlias, compileFilter, type PropertyStorage } from './compile.js'
import type { Target } from './fields.js'
import type { ResolvedNode } from './resolve.js'

/**
 * THE WHERE of every list, search, export and analytics statement (docs/decisions/0010): the
 * organization, liveness, the request's filter and the key's scope, compiled in one place so
 * no service joins condition strings.
 */
export interface WhereSpec {
  /** `assets`: the row is an asset; `relationships`: a relationship, visible when both ends are. */
  readonly target: Target
  /** The row alias of the statement (`a`, `p`, `r`). */
  readonly alias: string
  readonly orgId: string
  /** The request's resolved filter (MATCH_ALL for none). */
  readonly filter: ResolvedNode
  /** The key's scope over an asset row at the level needed (`scopeFilter` of src/access/scope.ts). */
  readonly scope: ResolvedNode
  /** Where asset rows and their properties are read; the jsonb document of `assets` by default. */
  readonly storage?: PropertyStorage
}

/**
 * `org_id` (not over a table of one organization's assets, the projection), then (assets over
 * `assets`) `archived_at IS NULL`, then the filter, then the scope:
 * on an asset row directly, on a relationship through both of its ends, each of which must be a
 * live asset the scope reaches (CONTRACT §9). Parts that match everything are left out (`TRUE`
 * when all do); values enter only through `params`, in that order.
 *
 * @example compileWhere({target: 'assets', alias: 'a', orgId, filter: MATCH_ALL, scope: MATCH_ALL}, params)
 *   // → a.org_id = $1 AND a.archived_at IS NULL
 * @example for a relationship, a key limited to domain `it`:
 *   r.org_id = $1 AND EXISTS (SELECT 1 FROM (SELECT vs.* FROM assets vs WHERE vs.org_id = r.org_id
 *     AND vs.id = r.source_asset_id OFFSET 0) vs WHERE vs.archived_at IS NULL AND vs."access_domain_key" = $2) AND EXISTS (… vt …)
 */
export function compileWhere(spec: WhereSpec, params: Params): string {
  const { alias, target } = spec
  checkAlias(alias)
  const storage = spec.storage ?? JSONB_STORAGE
  // A table of one organization's assets (the projection) holds no other organization's rows.
  const parts = target === 'assets' && storage.oneOrganization ? [] : [`${alias}.org_id = ${params.add(spec.orgId)}`]
  if (target === 'assets') {
    if (!storage.liveOnly) parts.push(`${alias}.archived_at IS NULL`)
    parts.push(compileFilter(spec.filter, params, alias, storage), compileFilter(spec.scope, params, alias, storage))
  } else {
    parts.push(compileFilter(spec.filter, params, alias, storage))
    parts.push(liveEnd(spec.scope, alias, 'vs', 'source_asset_id', params))
    parts.push(liveEnd(spec.scope, alias, 'vt', 'target_asset_id', params))
  }
  const conditions = parts.filter((part) => part !== 'TRUE')
  return conditions.length === 0 ? 'TRUE' : conditions.join(' AND ')
}

/**
 * A relationship's end is a live asset the scope reaches. EXISTS (not a join) only filters rows;
 * it can never duplicate one. The end is fetched by primary key inside an `OFFSET 0` fence and
 * checked outside it: the planner then always probes the primary key once per relationship,
 * whatever its statistics (with `archived_at IS NULL` inside, a store without statistics picked a
 * partial assets_live_* index and scanned every live asset per relationship). Always over
 * `assets`: only system columns are read.
 */
function liveEnd(scope: ResolvedNode, alias: string, end: string, column: string, params: Params): string {
  const visible = compileFilter(scope, params, end)
  return `EXISTS (SELECT 1 FROM (SELECT ${end}.* FROM assets ${end} WHERE ${end}.org_id = ${alias}.org_id AND ${end}.id = ${alias}.${column} OFFSET 0) ${end}`
    + ` WHERE ${end}.archived_at IS NULL${visible === 'TRUE' ? '' : ` AND ${visible}`})`
}
