import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../core/context.js'
import type { Tx } from '../store/db.js'
import { describeDomain, hasLevel } from '../access/scope.js'
import type { Level } from '../access/levels.js'
import { toAssetRecord, type AssetRecord, type AssetRow } from './mapper.js'
import { prepareAssetChange, prepareNewAsset, type AssetInput, type AssetPatch } from './prepare.js'
import { archiveAsset, insertAssets, selectAssetsByKeys, updateAssets } from './sql.js'
import { parseAssetRef } from './refs.js'
import { syncEmbeddedRelationships } from '../relationships/embedded.js'

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

export async function createAsset(ctx: RequestContext, input: AssetInput): Promise<AssetRecord> {
  requireWriter(ctx)
  const { row, issues } = prepareNewAsset(ctx.metamodel, input)
  if (issues.length > 0) throw new AppError(Errors.VALIDATION_FAILED, issues)
  if (!hasLevel(ctx.auth, row, 'edit')) throw forbidden('create', row)
  return ctx.db.transaction(async (tx) => {
    const [created] = await insertAssets(tx, ctx.auth.orgId, [row])
    if (input.relationships !== undefined) {
      await syncEmbeddedRelationships(tx, ctx, [{ asset: created!, relationships: input.relationships, pointer: '/relationships' }])
    }
    return toAssetRecord(created!)
  })
}

export async function updateAsset(ctx: RequestContext, ref: string, patch: AssetPatch): Promise<AssetRecord> {
  requireWriter(ctx)
  return ctx.db.transaction(async (tx) => {
    const existing = await findAsset(ctx, ref, 'edit', tx)
    const { change, issues } = prepareAssetChange(ctx.metamodel, existing, patch)
    if (issues.length > 0) throw new AppError(Errors.VALIDATION_FAILED, issues)
    if (change.access_domain_key !== existing.access_domain_key) {
      const target = { ...existing, access_domain_key: change.access_domain_key }
      if (!hasLevel(ctx.auth, existing, 'edit_access_domain') || !hasLevel(ctx.auth, target, 'edit_access_domain')) {
        throw new AppError(Errors.FORBIDDEN, 'moving an asset to another access domain needs edit_access_domain on both domains')
      }
    }
    const [updated] = await updateAssets(tx, ctx.auth.orgId, [change])
    if (patch.relationships !== undefined) {
      await syncEmbeddedRelationships(tx, ctx, [{ asset: updated!, relationships: patch.relationships, pointer: '/relationships' }])
    }
    return toAssetRecord(updated!)
  })
}

export async function archiveAssetByRef(ctx: RequestContext, ref: string): Promise<void> {
  requireWriter(ctx)
  await ctx.db.transaction(async (tx) => {
    const existing = await findAsset(ctx, ref, 'delete', tx)
    await archiveAsset(tx, ctx.auth.orgId, existing.id)
  })
}
