import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { isUuid } from '../core/time.js'
import { describeDomain, hasLevel, scopeCondition } from '../access/scope.js'
import { offsetOf, pageMeta, type Page, type PageMeta } from '../core/pagination.js'
import { isPgError } from '../core/pg-errors.js'
import { Params, escapeLike } from '../store/sql.js'
import type { Tx } from '../store/db.js'
import type { AuthContext } from '../core/auth/context.js'
import { originOf } from '../outbox/write.js'
import { toAssetRecord, type AssetRecord } from './mapper.js'
import { prepareAssetValues } from './prepare.js'
import { restoreAssets, selectArchivedAssetPage, selectArchivedAssets, selectLiveHolder, type ArchivedAssetRow } from './sql.js'

/*
 * Archived assets (console only, CONTRACT §15; the V1 API has no restore): the list, and restore.
 * Access is the API's: the caller's AuthContext (a console user's is built by
 * core/auth/user.ts with all of the user's roles) and the same scope functions as every read.
 */

export interface ArchivedAsset extends AssetRecord {
  archived_at: string
}

function toArchived(row: ArchivedAssetRow): ArchivedAsset {
  return { ...toAssetRecord(row), archived_at: new Date(row.archived_at).toISOString().replace(/\.\d{3}Z$/, 'Z') }
}

/** Archived assets the caller can see, most recently archived first; `name` matches a part, any case. */
export async function listArchivedAssets(ctx: RequestContext, query: { type?: string; name?: string; page: Page }): Promise<{ data: ArchivedAsset[]; page: PageMeta }> {
  const params = new Params([ctx.auth.orgId])
  const conditions = ['a.org_id = $1', 'a.archived_at IS NOT NULL']
  if (query.type) conditions.push(`a.asset_type_key = ${params.add(query.type)}`)
  if (query.name) conditions.push(`a.name ILIKE ${params.add(`%${escapeLike(query.name)}%`)} ESCAPE '\\'`)
  const scope = scopeCondition(ctx.auth, 'a', 'view', params)
  if (scope !== 'TRUE') conditions.push(scope)
  const result = await selectArchivedAssetPage(ctx.db, {
    where: conditions.join(' AND '),
    orderBy: 'a.archived_at DESC, a.id',
    limit: query.page.size,
    offset: offsetOf(query.page),
    params,
  })
  return { data: result.rows.map(toArchived), page: pageMeta(query.page, result) }
}

/**
 * Loads one archived asset for a change, locked: hidden (or unknown, or live) is 404; visible
 * without `delete` is 403, like archiving it was.
 */
export async function findArchived(ctx: RequestContext, tx: Tx, id: string, action: string): Promise<ArchivedAssetRow> {
  const row = isUuid(id) ? (await selectArchivedAssets(tx, ctx.auth.orgId, [id], true))[0] : undefined
  if (!row || !hasLevel(ctx.auth, row, 'view')) throw new AppError(Errors.NOT_FOUND, `archived asset ${id} not found`)
  if (!hasLevel(ctx.auth, row, 'delete')) {
    throw new AppError(Errors.FORBIDDEN, `your roles do not allow to ${action} ${row.asset_type_key} assets in ${describeDomain(row.access_domain_key)}`)
  }
  return row
}

function uniqueTaken(ctx: RequestContext, row: ArchivedAssetRow, value: string): AppError {
  const property = ctx.metamodel.assetTypes.get(row.asset_type_key)?.unique_property_key ?? 'unique key'
  return new AppError(Errors.UNIQUE_VIOLATION, `${row.name} cannot be restored: a live ${row.asset_type_key} asset now holds the ${property} value "${value}"`)
}

/**
 * How many relationships of asset `id` the caller sees both ends of (CONTRACT §9: a relationship
 * is visible when both ends are); with `live`, only those whose both ends are live (those a restore
 * brings back). What the console says a restore or a permanent deletion did: a relationship to an
 * asset the caller cannot see is never counted, as it is never listed.
 */
export async function countVisibleRelationshipsOf(tx: Tx, auth: AuthContext, id: string, live: boolean): Promise<number> {
  const params = new Params([auth.orgId, id])
  const alive = (alias: string): string => (live ? ` AND ${alias}.archived_at IS NULL` : '')
  const result = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n
     FROM relationships r
     JOIN assets s ON s.org_id = r.org_id AND s.id = r.source_asset_id${alive('s')}
     JOIN assets t ON t.org_id = r.org_id AND t.id = r.target_asset_id${alive('t')}
     WHERE r.org_id = $1 AND (r.source_asset_id = $2 OR r.target_asset_id = $2)
       AND ${scopeCondition(auth, 's', 'view', params)} AND ${scopeCondition(auth, 't', 'view', params)}`,
    params.values,
  )
  return result.rows[0]!.n
}

/**
 * What an archived asset holds that the metamodel no longer allows. `kbis apply` checks a change
 * against live assets only (archived ones may hold anything the metamodel once allowed: an option
 * since removed, a property since dropped, an access domain since deleted), so a restore checks
 * the asset as a create would, lest live data contradict the metamodel (CONTRACT §12).
 */
function disallowed(ctx: RequestContext, row: ArchivedAssetRow): AppError | null {
  const { issues } = prepareAssetValues(ctx.metamodel, {
    asset_type_key: row.asset_type_key, name: row.name, access_domain_key: row.access_domain_key, properties: row.properties,
  })
  if (issues.length === 0) return null
  return new AppError(Errors.VALIDATION_FAILED, `${row.name} cannot be restored: the metamodel no longer allows what it holds `
    + `(${issues.map((issue) => issue.detail).join('; ')}). Allow it again with kbis apply to restore it, or delete it permanently.`)
}

/**
 * Restores an archived asset: Editor or above and `delete` on it (CONTRACT §15). Refused (409
 * unique_violation, naming the value) when a live asset now holds its unique value, and (422
 * validation_failed, naming each value) when the metamodel no longer allows what it holds.
 * Returns the asset and how many of the relationships that came back with it (those whose other
 * end is live) the caller sees.
 */
export async function restoreArchivedAsset(ctx: RequestContext, id: string): Promise<{ asset: AssetRecord; relationships: number }> {
  if (ctx.auth.permission === 'Viewer') throw new AppError(Errors.FORBIDDEN, 'a Viewer cannot restore assets')
  return ctx.db.transaction(async (tx) => {
    const row = await findArchived(ctx, tx, id, 'restore')
    const refused = disallowed(ctx, row)
    if (refused) throw refused
    if (row.unique_value !== null && (await selectLiveHolder(tx, ctx.auth.orgId, row.asset_type_key, row.unique_value))) {
      throw uniqueTaken(ctx, row, row.unique_value)
    }
    let restored
    try {
      restored = await restoreAssets(tx, originOf(ctx), [row.id])
    } catch (err) {
      // A concurrent write took the value between the check and the update.
      if (isPgError(err, '23505', 'assets_unique_prop')) throw uniqueTaken(ctx, row, row.unique_value ?? '')
      throw err
    }
    return { asset: toAssetRecord(restored[0]!), relationships: await countVisibleRelationshipsOf(tx, ctx.auth, row.id, true) }
  })
}
