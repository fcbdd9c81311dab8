import type { AuthContext } from '../core/auth/context.js'
import { scopeCondition } from '../access/scope.js'
import type { Params } from '../store/sql.js'

/**
 * The SQL condition under which the relationship row `alias` exists for this key (CONTRACT §9):
 * both ends live and visible at `view`. It is ANDed into the same statement as the request's own
 * conditions, so hidden relationships never leave the database. EXISTS on each end (not a join)
 * only filters rows; it can never duplicate one.
 *
 * Each end is fetched by primary key inside an `OFFSET 0` fence and checked outside it: the
 * planner then always probes the primary key once per relationship, whatever its statistics
 * (with `archived_at IS NULL` inside, a store without statistics picked a partial assets_live_*
 * index and scanned every live asset per relationship).
 *
 * @example for a key limited to domain `it`:
 *   EXISTS (SELECT 1 FROM (SELECT vs.* FROM assets vs WHERE vs.org_id = r.org_id AND vs.id = r.source_asset_id OFFSET 0) vs
 *           WHERE vs.archived_at IS NULL AND ((vs.access_domain_key = $2))) AND EXISTS (… vt …)
 */
export function visibleRelationship(auth: AuthContext, alias: string, params: Params): string {
  return `${liveEnd(auth, alias, 'vs', 'source_asset_id', params)} AND ${liveEnd(auth, alias, 'vt', 'target_asset_id', params)}`
}

function liveEnd(auth: AuthContext, alias: string, end: string, column: string, params: Params): string {
  const scope = scopeCondition(auth, end, 'view', params)
  const visible = scope === 'TRUE' ? '' : ` AND ${scope}`
  return `EXISTS (SELECT 1 FROM (SELECT ${end}.* FROM assets ${end} WHERE ${end}.org_id = ${alias}.org_id AND ${end}.id = ${alias}.${column} OFFSET 0) ${end}`
    + ` WHERE ${end}.archived_at IS NULL${visible})`
}
