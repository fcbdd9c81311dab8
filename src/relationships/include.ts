import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../core/context.js'
import type { AssetRecord } from '../assets/mapper.js'

/** Attaches included relationships to a page of assets (include=relationships…). */
export async function includeRelationships(
  _ctx: RequestContext,
  assets: AssetRecord[],
  query: Record<string, unknown>,
): Promise<AssetRecord[]> {
  // Placeholder until the relationships feature lands in this session.
  if (query.include === undefined) return assets
  throw new AppError(Errors.INVALID_INCLUDE, [{ detail: 'include is not available yet', parameter: 'include' }])
}
