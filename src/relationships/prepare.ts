import type { Issue } from '../core/errors.js'
import type { RequestContext } from '../request/context.js'
import type { Queryable } from '../store/db.js'
import { hasLevel } from '../access/scope.js'
import { newId } from '../core/time.js'
import type { AssetReference } from '../refs/sql.js'
import type { RelationshipType } from '../metamodel/types.js'
import { cannotEdit, endAllows, endNotAllowed, type End } from './resolve.js'
import { resolveAssetRefs } from '../refs/resolve.js'
import type { NewRelationshipRow } from './sql.js'

/** Body of POST /relationships, and of each POST /bulk/relationships item. */
export interface RelationshipInput {
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
}

export interface PreparedRelationships {
  /** One row per valid item, in item order: when both issue lists are empty, rows[i] is items[i]. */
  rows: NewRelationshipRow[]
  /** The item index of each row. */
  indexes: number[]
  /** 422 validation_failed: unknown type, unknown/archived/hidden end, end type not allowed. */
  issues: Issue[]
  /** 403 forbidden: the source is visible but the key may not edit it. */
  forbidden: Issue[]
}

/**
 * Validates and resolves a whole batch of relationships against the metamodel, the store and the
 * key's roles, with ONE lookup statement for every end of every item. Nothing is written.
 * Every problem is reported (not only the first), each issue with `meta.index` and a pointer
 * `/<index>/<member>` (the bulk body's shape; a single write strips `/0`). Items in
 * `skip` (failed already, say on the body's schema) are left out.
 *
 * @example await prepareRelationships(ctx, [{relationship_type_key: 'runs_on',
 *   source_asset_id: 'application:code:crm', target_asset_id: 'server:hostname:web-01'}], tx)
 *   // → {rows: [{id, relationship_type_key: 'runs_on', source_asset_id: '<uuid>', target_asset_id: '<uuid>'}], issues: [], forbidden: []}
 */
export async function prepareRelationships(
  ctx: RequestContext,
  items: readonly RelationshipInput[],
  tx: Queryable,
  skip: ReadonlySet<number> = new Set(),
): Promise<PreparedRelationships> {
  const assets = await resolveAssetRefs(ctx, tx, items.flatMap((item, index) => (skip.has(index) ? [] : [item.source_asset_id, item.target_asset_id])))
  const out: PreparedRelationships = { rows: [], indexes: [], issues: [], forbidden: [] }
  items.forEach((item, index) => {
    if (skip.has(index)) return
    const at = (member: string, detail: string): Issue => ({ detail, pointer: `/${index}/${member}`, meta: { index } })
    const issuesBefore = out.issues.length
    const type = ctx.metamodel.relationshipTypes.get(item.relationship_type_key)
    if (!type) out.issues.push(at('relationship_type_key', `unknown relationship type ${item.relationship_type_key}`))
    const source = checkEnd(type, 'source', item.source_asset_id, assets.get(item.source_asset_id), at, out.issues)
    const target = checkEnd(type, 'target', item.target_asset_id, assets.get(item.target_asset_id), at, out.issues)
    // Creating (or deleting) a relationship needs edit on its source asset (CONTRACT §9); an
    // item that is invalid already is not also reported as forbidden.
    const valid = out.issues.length === issuesBefore
    if (valid && source && !hasLevel(ctx.auth, source, 'edit')) out.forbidden.push(at('source_asset_id', cannotEdit(source)))
    if (type && source && target) {
      out.rows.push({ id: newId(), relationship_type_key: type.key, source_asset_id: source.id, target_asset_id: target.id })
      out.indexes.push(index)
    }
  })
  return out
}

function checkEnd(
  type: RelationshipType | undefined,
  end: End,
  ref: string,
  asset: AssetReference | undefined,
  at: (member: string, detail: string) => Issue,
  issues: Issue[],
): AssetReference | undefined {
  const member = `${end}_asset_id`
  if (!asset) {
    issues.push(at(member, `${end} asset ${ref} not found`))
    return undefined
  }
  if (type && !endAllows(type, end, asset.asset_type_key)) {
    issues.push(at(member, endNotAllowed(type, end, asset.asset_type_key)))
    return undefined
  }
  return asset
}
