import { AppError, Errors, type Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import { toRelatedAsset, type RelationshipRecord } from './mapper.js'
import { selectRelatedAssets } from './sql.js'

type Expansion = 'none' | 'asset' | 'properties'

/** What include asks of a relationship's ends (include=source_asset,target_asset.properties). */
export interface EndIncludes {
  source: Expansion
  target: Expansion
}

export const NO_ENDS: EndIncludes = Object.freeze({ source: 'none', target: 'none' })

// `source_asset.properties` alone implies `source_asset`, as a nested JSON:API include does.
// A Map: an object literal would also answer `constructor`, `__proto__`, `toString`, … .
const END_INCLUDES: ReadonlyMap<string, [keyof EndIncludes, Expansion]> = new Map([
  ['source_asset', ['source', 'asset']],
  ['source_asset.properties', ['source', 'properties']],
  ['target_asset', ['target', 'asset']],
  ['target_asset.properties', ['target', 'properties']],
])

/** `include` of the relationship endpoints, comma-separated; anything else is 400 invalid_include. */
export function parseEndIncludes(include: unknown): EndIncludes {
  const values = typeof include === 'string' ? include.split(',').map((v) => v.trim()).filter((v) => v !== '') : []
  return readEndIncludes(values, () => ({ parameter: 'include' }))
}

/**
 * THE reader of relationship end includes, for the query parameter and the search body's array:
 * `["source_asset", "target_asset.properties"]` → what to expand; `.properties` implies the end.
 * `at(i)` says where an issue about item `i` points.
 */
export function readEndIncludes(values: readonly unknown[], at: (i: number) => Pick<Issue, 'pointer' | 'parameter'>): EndIncludes {
  const out = { ...NO_ENDS }
  values.forEach((value, i) => {
    const hit = typeof value === 'string' ? END_INCLUDES.get(value) : undefined
    if (hit === undefined) {
      throw new AppError(Errors.INVALID_INCLUDE, [{
        detail: `unknown include ${JSON.stringify(value)}; relationships include source_asset, target_asset, each optionally with .properties`,
        ...at(i),
      }])
    }
    if (out[hit[0]] !== 'properties') out[hit[0]] = hit[1]
  })
  return out
}

/**
 * Expands the ends of a page of relationships with one statement for the whole page. The
 * records come from reads that already required both ends live and visible.
 */
export async function attachEnds(ctx: RequestContext, records: RelationshipRecord[], include: EndIncludes): Promise<RelationshipRecord[]> {
  if (include.source === 'none' && include.target === 'none') return records
  const ids = records.flatMap((r) => [
    ...(include.source === 'none' ? [] : [r.source_asset_id]),
    ...(include.target === 'none' ? [] : [r.target_asset_id]),
  ])
  const withProperties = include.source === 'properties' || include.target === 'properties'
  const rows = new Map((await selectRelatedAssets(ctx.db, ctx.auth.orgId, ids, withProperties)).map((row) => [row.id, row]))
  return records.map((record) => {
    const out = { ...record }
    const source = rows.get(record.source_asset_id)
    const target = rows.get(record.target_asset_id)
    if (include.source !== 'none' && source) out.source_asset = toRelatedAsset(source, include.source === 'properties')
    if (include.target !== 'none' && target) out.target_asset = toRelatedAsset(target, include.target === 'properties')
    return out
  })
}
