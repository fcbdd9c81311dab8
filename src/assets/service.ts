import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Tx } from '../store/db.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import type { Level } from '../core/auth/levels.js'
import { parseAssetRef } from '../metamodel/refs.js'
import { asSingleItem } from '../core/items.js'
import { toAssetRecord, type AssetRecord, type AssetRow } from './mapper.js'
import type { AssetInput, AssetPatch } from './prepare.js'
import { archiveAssets, selectAssetsByKeys } from './sql.js'
import { createAssets } from './create.js'
import { patchAssets } from './update.js'
import { upsertAssets, type UpsertItem, type UpsertResult } from './upsert.js'
import { originOf } from '../outbox/write.js'

function notFound(ref: string): AppError {
  return new AppError(Errors.NOT_FOUND, `asset ${ref} not found`)
}

function forbidden(action: string, asset: { access_domain_key: string | null; asset_type_key: string }): AppError {
  const domain = describeDomain(asset.access_domain_key)
  return new AppError(Errors.FORBIDDEN, `the key's roles do not allow to ${action} ${asset.asset_type_key} assets in ${domain}`)
}

function requireWriter(ctx: RequestContext): void {
  if (ctx.auth.permission === 'Viewer') throw new AppError(Errors.FORBIDDEN, 'a Viewer key cannot write')
}

/**
 * Finds one live asset by UUID or composite key, as the key sees it: hidden assets are 404, and
 * a visible asset without `level` is 403.
 */
export async function findAsset(ctx: RequestContext, ref: string, level: Level, tx?: Tx): Promise<AssetRow> {
  const key = parseAssetRef(ref, ctx.metamodel)
  if (!key) throw notFound(ref)
  const row = (await selectAssetsByKeys(tx ?? ctx.db, ctx.auth.orgId, [key], tx !== undefined))[0]
  if (!row || !hasLevel(ctx.auth, row, 'view')) throw notFound(ref)
  if (level !== 'view' && !hasLevel(ctx.auth, row, level)) throw forbidden(level === 'delete' ? 'archive' : 'change', row)
  return row
}

export async function getAsset(ctx: RequestContext, ref: string): Promise<AssetRecord> {
  return toAssetRecord(await findAsset(ctx, ref, 'view'))
}

/** POST /assets: a bulk create of one item (create.ts), errors pointing into the body itself. */
export async function createAsset(ctx: RequestContext, input: AssetInput): Promise<AssetRecord> {
  requireWriter(ctx)
  const [created] = await asSingleItem(() => createAssets(ctx, [input]))
  return toAssetRecord(created!)
}

/** PATCH /assets/{id}: a bulk update of one item (update.ts); an asset it cannot name is 404. */
export async function updateAsset(ctx: RequestContext, ref: string, patch: AssetPatch): Promise<AssetRecord> {
  requireWriter(ctx)
  const [updated] = await asSingleItem(() => patchAssets(ctx, [{ ...patch, id: ref }], undefined, { single: true }))
  return toAssetRecord(updated!)
}

/** PUT /assets/{composite key}: an upsert of one item (upsert.ts). */
export async function upsertAsset(ctx: RequestContext, item: UpsertItem, merge: boolean): Promise<{ data: AssetRecord; result: UpsertResult }> {
  requireWriter(ctx)
  const [outcome] = await asSingleItem(() => upsertAssets(ctx, [item], undefined, { merge, single: true }))
  return { data: toAssetRecord(outcome!.row!), result: outcome!.result }
}

export async function archiveAssetByRef(ctx: RequestContext, ref: string): Promise<void> {
  requireWriter(ctx)
  await ctx.db.transaction(async (tx) => {
    const existing = await findAsset(ctx, ref, 'delete', tx)
    await archiveAssets(tx, originOf(ctx), [existing.id])
  })
}
