import { refuse, record, type ApplyContext } from './context.js'
import { count, fieldChanges, reordered } from './diff.js'
import { countRelationships, countRelationshipsOutside } from './guards.js'
import { positionKey } from './state.js'
import type { RelationshipTypeSpec } from './types.js'

const FIELDS = ['name', 'description', 'source_asset_type_keys', 'target_asset_type_keys'] as const

async function removeRelationshipType(ctx: ApplyContext, key: string): Promise<void> {
  const used = await countRelationships(ctx.tx, ctx.orgId, key)
  if (used > 0) refuse(ctx, `cannot remove relationship type ${key}: ${count(used, 'relationship')} this type`)
  await ctx.tx.query('DELETE FROM relationship_types WHERE org_id = $1 AND key = $2', [ctx.orgId, key])
  record(ctx, [`relationship type ${key}: removed`], true)
}

/** An allowed list that is now narrower (an empty list allows every asset type). */
function narrowed(before: string[], after: string[]): boolean {
  return after.length > 0 && (before.length === 0 || before.some((k) => !after.includes(k)))
}

/** Refuses narrowing the allowed source or target asset types while relationships use the others. */
async function guardEnds(ctx: ApplyContext, before: RelationshipTypeSpec, after: RelationshipTypeSpec): Promise<void> {
  const ends = [
    ['source', before.source_asset_type_keys, after.source_asset_type_keys, ['starts at', 'start at']],
    ['target', before.target_asset_type_keys, after.target_asset_type_keys, ['ends at', 'end at']],
  ] as const
  for (const [end, from, to, verb] of ends) {
    if (!narrowed(from, to)) continue
    const outside = await countRelationshipsOutside(ctx.tx, ctx.orgId, after.key, end, to)
    if (outside > 0) {
      refuse(ctx, `cannot restrict the ${end} asset types of relationship type ${after.key} to ${to.join(', ')}: ` +
        `${count(outside, 'relationship', [...verb])} an asset of another type`)
    }
  }
}

async function upsertRelationshipType(ctx: ApplyContext, t: RelationshipTypeSpec, position: number): Promise<void> {
  const before = ctx.state.relationshipTypes.get(t.key)
  const lines = before ? fieldChanges(`relationship type ${t.key}`, before, t, FIELDS) : [`relationship type ${t.key}: created`]
  if (lines.length === 0 && ctx.state.positions.get(positionKey.relationshipType(t.key)) === position) return
  if (before) await guardEnds(ctx, before, t)
  await ctx.tx.query(
    `INSERT INTO relationship_types (org_id, key, name, description, source_asset_type_keys, target_asset_type_keys, position)
     VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7)
     ON CONFLICT (org_id, key) DO UPDATE SET name = $3, description = $4,
       source_asset_type_keys = $5::text[], target_asset_type_keys = $6::text[], position = $7`,
    [ctx.orgId, t.key, t.name, t.description, t.source_asset_type_keys, t.target_asset_type_keys, position],
  )
  record(ctx, lines, true)
}

/** Declarative: the file's relationship types replace the stored ones when it lists them. */
export async function applyRelationshipTypes(ctx: ApplyContext): Promise<void> {
  const wanted = ctx.setup.metamodel?.relationship_types
  if (!wanted) return
  const keys = new Set(wanted.map((t) => t.key))
  for (const key of ctx.state.relationshipTypes.keys()) if (!keys.has(key)) await removeRelationshipType(ctx, key)
  for (const [i, t] of wanted.entries()) await upsertRelationshipType(ctx, t, i)
  if (reordered([...ctx.state.relationshipTypes.keys()], [...keys])) record(ctx, ['relationship types: reordered'], true)
}
