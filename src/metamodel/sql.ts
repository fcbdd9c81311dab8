import type { Queryable } from '../store/db.js'
import type { AssetType, PropertyDefinition, RelationshipType } from './types.js'

export async function selectMetamodelVersion(db: Queryable, orgId: string): Promise<number> {
  const row = (await db.query<{ v: number }>('SELECT metamodel_version AS v FROM organizations WHERE id = $1', [orgId])).rows[0]
  return row?.v ?? 0
}

/**
 * The organization's metamodel version, its row held with a key share until the transaction ends:
 * an apply that locks the row (FOR UPDATE) to change the metamodel waits for this transaction, and
 * one that holds it already is waited for, its new version read once it commits (metamodel/fence.ts).
 */
export async function lockMetamodelVersion(tx: Queryable, orgId: string): Promise<number | null> {
  return (await tx.query<{ v: number }>('SELECT metamodel_version AS v FROM organizations WHERE id = $1 FOR KEY SHARE', [orgId])).rows[0]?.v ?? null
}

export async function selectAssetTypes(db: Queryable, orgId: string): Promise<Omit<AssetType, 'properties' | 'unique_property_key'>[]> {
  return (
    await db.query<Omit<AssetType, 'properties' | 'unique_property_key'>>(
      'SELECT key, name, description FROM asset_types WHERE org_id = $1 ORDER BY position, key',
      [orgId],
    )
  ).rows
}

export async function selectPropertyDefinitions(db: Queryable, orgId: string): Promise<PropertyDefinition[]> {
  return (
    await db.query<PropertyDefinition>(
      `SELECT key, asset_type_key, name, description, type, required, options, currency, min, max
       FROM property_definitions WHERE org_id = $1 ORDER BY asset_type_key, position, key`,
      [orgId],
    )
  ).rows
}

export async function selectRelationshipTypes(db: Queryable, orgId: string): Promise<RelationshipType[]> {
  return (
    await db.query<RelationshipType>(
      `SELECT key, name, description, source_asset_type_keys, target_asset_type_keys
       FROM relationship_types WHERE org_id = $1 ORDER BY position, key`,
      [orgId],
    )
  ).rows
}

export async function selectAccessDomainKeys(db: Queryable, orgId: string): Promise<string[]> {
  return (await db.query<{ key: string }>('SELECT key FROM access_domains WHERE org_id = $1', [orgId])).rows.map((r) => r.key)
}
