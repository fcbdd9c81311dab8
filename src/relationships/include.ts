import type { RequestContext } from '../request/context.js'
import { includedPageMeta, offsetOf } from '../core/pagination.js'
import { toRelatedAsset, type RelatedAssetRecord } from './mapper.js'
import { selectIncludedRelationships, type IncludedRow } from './include-sql.js'
import { includeOptionsFromQuery, type RelationshipIncludeOptions } from './include-options.js'
import type { Direction } from './embedded-sql.js'

export { includeOptionsFromBody, includeOptionsFromQuery, parseAssetIncludes, type IncludeBody, type RelatedExpansion, type RelationshipIncludeOptions } from './include-options.js'
export type { IncludeFilter, IncludeSort, IncludeSortField } from './include-sql.js'

/** What includes attach to: any asset record (the relationships module does not know its shape beyond the id). */
type AssetRecord = { id: string; relationships?: unknown[]; relationships_meta?: unknown }

/** One entry of an asset's `relationships` (CONTRACT §2, read shape). */
export interface IncludedRelationship {
  id: string
  relationship_type_key: string
  direction: Direction
  related_asset_id: string
  related_asset?: RelatedAssetRecord
}

/**
 * Attaches included relationships to a page of assets from the query string of GET /assets and
 * GET /assets/{id} (include, relationships_page, relationships_filter, relationships_sort). A thin
 * adapter: the work is {@link includeRelationshipsWith}. Without an include the assets come back
 * as they are; an unknown include value is 400 invalid_include.
 */
export async function includeRelationships<T extends AssetRecord>(
  ctx: RequestContext,
  assets: T[],
  query: Record<string, unknown>,
): Promise<T[]> {
  const options = includeOptionsFromQuery(query)
  return options === null ? assets : includeRelationshipsWith(ctx, assets, options)
}

/**
 * Attaches to each asset its relationships (both directions, only those whose other end is live
 * and visible to the key), each asset paged, filtered and sorted on its own, with
 * `relationships_meta: {page}`. One statement for the whole page of assets, whatever its size
 * (see selectIncludedRelationships). Search calls it with options from includeOptionsFromBody.
 */
export async function includeRelationshipsWith<T extends AssetRecord>(
  ctx: RequestContext,
  assets: T[],
  options: RelationshipIncludeOptions,
): Promise<T[]> {
  const rows = await selectIncludedRelationships(ctx.db, ctx.auth, assets.map((a) => a.id), {
    page: options.page,
    filter: options.filter,
    sort: options.sort,
    withProperties: options.expand === 'properties',
  })
  const first = offsetOf(options.page)
  const byAsset = new Map<string, { total: number; list: IncludedRelationship[] }>()
  for (const row of rows) {
    const entry = byAsset.get(row.asset_id) ?? { total: Number(row.total), list: [] }
    // Row 1 comes back for its total even when the page asked for starts further on.
    if (Number(row.rn) > first) entry.list.push(toIncluded(row, options))
    byAsset.set(row.asset_id, entry)
  }
  return assets.map((asset) => {
    const entry = byAsset.get(asset.id) ?? { total: 0, list: [] }
    return { ...asset, relationships: entry.list, relationships_meta: { page: includedPageMeta(options.page, entry.total) } }
  })
}

function toIncluded(row: IncludedRow, options: RelationshipIncludeOptions): IncludedRelationship {
  const entry: IncludedRelationship = {
    id: row.id,
    relationship_type_key: row.relationship_type_key,
    direction: row.direction,
    related_asset_id: row.related_id,
  }
  if (options.expand !== 'ids') {
    entry.related_asset = toRelatedAsset({
      id: row.related_id,
      asset_type_key: row.related_asset_type_key,
      name: row.related_name,
      created_at: row.related_created_at,
      updated_at: row.related_updated_at,
      properties: row.related_properties ?? null,
    }, options.expand === 'properties')
  }
  return entry
}
