import { refuse, record, type ApplyContext } from './context.js'
import { count, fieldChanges, reordered } from './diff.js'
import { countAssetsOfType, fillUniqueValues } from './guards.js'
import { guardProperty, guardPropertyRemoval } from './property-guard.js'
import { positionKey } from './state.js'
import type { AssetTypeSpec, PropertySpec } from './types.js'

const PROPERTY_FIELDS = ['name', 'description', 'type', 'required', 'options', 'currency', 'min', 'max'] as const

function uniqueKeyOf(type: AssetTypeSpec): string | null {
  return type.properties.find((p) => p.type === 'unique_key')?.key ?? null
}

/** What still names asset type `key` among the items the file keeps from the store. */
function storedReferences(ctx: ApplyContext, key: string): string | null {
  if (!ctx.setup.roles) {
    const role = [...ctx.state.roles.values()].find((r) => r.grants.some((g) => g.asset_type_keys.includes(key)))
    if (role) return `role ${role.key}, not listed in the file, grants on it`
  }
  if (!ctx.setup.metamodel?.relationship_types) {
    const rel = [...ctx.state.relationshipTypes.values()].find(
      (t) => t.source_asset_type_keys.includes(key) || t.target_asset_type_keys.includes(key),
    )
    if (rel) return `relationship type ${rel.key}, not listed in the file, names it`
  }
  return null
}

/** Archived assets block too: they keep their type (a foreign key), and are kept for the console. */
async function removeAssetType(ctx: ApplyContext, key: string): Promise<void> {
  const assets = await countAssetsOfType(ctx.tx, ctx.orgId, key)
  if (assets.all > 0) {
    const archived = assets.archived > 0 ? ` (${assets.archived} of them archived)` : ''
    refuse(ctx, `cannot remove asset type ${key}: ${count(assets.all, 'asset')} this type${archived}`)
  }
  const reference = storedReferences(ctx, key)
  if (reference) refuse(ctx, `cannot remove asset type ${key}: ${reference}`)
  await ctx.tx.query('DELETE FROM asset_types WHERE org_id = $1 AND key = $2', [ctx.orgId, key])
  record(ctx, [`asset type ${key}: removed`], true)
}

async function writeProperty(ctx: ApplyContext, type: string, p: PropertySpec, position: number): Promise<void> {
  await ctx.tx.query(
    `INSERT INTO property_definitions
       (org_id, asset_type_key, key, name, description, type, required, options, currency, min, max, position)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text[], $9, $10, $11, $12)
     ON CONFLICT (org_id, asset_type_key, key) DO UPDATE SET name = $4, description = $5, type = $6,
       required = $7, options = $8::text[], currency = $9, min = $10, max = $11, position = $12`,
    [ctx.orgId, type, p.key, p.name, p.description, p.type, p.required, p.options, p.currency, p.min, p.max, position],
  )
}

async function applyProperty(ctx: ApplyContext, type: string, before: PropertySpec | null, p: PropertySpec, position: number): Promise<void> {
  const label = `property ${type}.${p.key}`
  const lines = before ? fieldChanges(label, before, p, PROPERTY_FIELDS) : [`${label}: created`]
  const moved = ctx.state.positions.get(positionKey.property(type, p.key)) !== position
  if (lines.length === 0 && !moved) return
  await guardProperty(ctx, type, before, p)
  await writeProperty(ctx, type, p, position)
  record(ctx, lines, true)
}

async function applyProperties(ctx: ApplyContext, before: AssetTypeSpec, after: AssetTypeSpec): Promise<void> {
  const wanted = new Set(after.properties.map((p) => p.key))
  for (const p of before.properties) {
    if (wanted.has(p.key)) continue
    await guardPropertyRemoval(ctx, after.key, p.key)
    await ctx.tx.query('DELETE FROM property_definitions WHERE org_id = $1 AND asset_type_key = $2 AND key = $3', [
      ctx.orgId, after.key, p.key,
    ])
    record(ctx, [`property ${after.key}.${p.key}: removed`], true)
  }
  const stored = new Map(before.properties.map((p) => [p.key, p]))
  for (const [i, p] of after.properties.entries()) await applyProperty(ctx, after.key, stored.get(p.key) ?? null, p, i)
  const order = (t: AssetTypeSpec): string[] => t.properties.map((p) => p.key)
  if (reordered(order(before), order(after))) record(ctx, [`asset type ${after.key}: properties reordered`], true)
}

/** A new or changed unique_key property: `assets.unique_value` follows it (NULL when none). */
async function syncUniqueValues(ctx: ApplyContext, before: AssetTypeSpec, after: AssetTypeSpec): Promise<void> {
  const from = uniqueKeyOf(before)
  const to = uniqueKeyOf(after)
  if (from === to) return
  await fillUniqueValues(ctx.tx, ctx.orgId, after.key, to)
  record(ctx, [`asset type ${after.key}: unique_property_key ${from ?? '(none)'} → ${to ?? '(none)'}`], true)
}

async function createAssetType(ctx: ApplyContext, t: AssetTypeSpec, position: number): Promise<void> {
  await ctx.tx.query('INSERT INTO asset_types (org_id, key, name, description, position) VALUES ($1, $2, $3, $4, $5)', [
    ctx.orgId, t.key, t.name, t.description, position,
  ])
  for (const [i, p] of t.properties.entries()) await writeProperty(ctx, t.key, p, i)
  record(ctx, [`asset type ${t.key}: created`], true)
}

async function updateAssetType(ctx: ApplyContext, before: AssetTypeSpec, t: AssetTypeSpec, position: number): Promise<void> {
  const lines = fieldChanges(`asset type ${t.key}`, before, t, ['name', 'description'])
  if (lines.length > 0 || ctx.state.positions.get(positionKey.assetType(t.key)) !== position) {
    await ctx.tx.query('UPDATE asset_types SET name = $3, description = $4, position = $5 WHERE org_id = $1 AND key = $2', [
      ctx.orgId, t.key, t.name, t.description, position,
    ])
    record(ctx, lines, true)
  }
  await applyProperties(ctx, before, t)
  await syncUniqueValues(ctx, before, t)
}

/**
 * Declarative: the file's asset types (with their properties, in file order) replace the stored
 * ones when the file lists `metamodel.asset_types`. Changes that live data contradicts are refused.
 */
export async function applyAssetTypes(ctx: ApplyContext): Promise<void> {
  const wanted = ctx.setup.metamodel?.asset_types
  if (!wanted) return
  const keys = new Set(wanted.map((t) => t.key))
  for (const key of ctx.state.assetTypes.keys()) if (!keys.has(key)) await removeAssetType(ctx, key)
  for (const [i, t] of wanted.entries()) {
    const before = ctx.state.assetTypes.get(t.key)
    await (before ? updateAssetType(ctx, before, t, i) : createAssetType(ctx, t, i))
  }
  if (reordered([...ctx.state.assetTypes.keys()], [...keys])) record(ctx, ['asset types: reordered'], true)
}
