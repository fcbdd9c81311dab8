import type { Db } from '../store/db.js'
import { AppError, Errors } from '../core/errors.js'
import {
  selectAccessDomainKeys, selectAssetTypes, selectMetamodelVersion, selectPropertyDefinitions, selectRelationshipTypes,
} from './sql.js'
import type { AssetType, Metamodel, PropertyDefinition, RelationshipType } from './types.js'
import { compilePropertiesValidator, type PropertiesValidator } from './validate.js'

/** A loaded metamodel plus the validators compiled from it (once per version). */
export interface LoadedMetamodel extends Metamodel {
  /** Keys of the organization's access domains (asset writes check them). */
  accessDomains: ReadonlySet<string>
  validator(assetTypeKey: string): PropertiesValidator
  assetType(key: string): AssetType
}

async function load(db: Db, orgId: string): Promise<LoadedMetamodel> {
  const [version, types, props, relTypes, domains] = await Promise.all([
    selectMetamodelVersion(db, orgId),
    selectAssetTypes(db, orgId),
    selectPropertyDefinitions(db, orgId),
    selectRelationshipTypes(db, orgId),
    selectAccessDomainKeys(db, orgId),
  ])
  const byType = new Map<string, PropertyDefinition[]>()
  const byKey = new Map<string, PropertyDefinition[]>()
  for (const p of props) {
    p.min = p.min === null ? null : Number(p.min)
    p.max = p.max === null ? null : Number(p.max)
    byType.set(p.asset_type_key, [...(byType.get(p.asset_type_key) ?? []), p])
    byKey.set(p.key, [...(byKey.get(p.key) ?? []), p])
  }
  const assetTypes = new Map<string, AssetType>(
    types.map((t) => {
      const properties = byType.get(t.key) ?? []
      const unique = properties.find((p) => p.type === 'unique_key')
      return [t.key, { ...t, unique_property_key: unique?.key ?? null, properties }]
    }),
  )
  const validators = new Map<string, PropertiesValidator>()
  const assetType = (key: string): AssetType => {
    const type = assetTypes.get(key)
    if (!type) throw new AppError(Errors.VALIDATION_FAILED, [{ detail: `unknown asset type ${key}`, pointer: '/asset_type_key' }])
    return type
  }
  return {
    orgId,
    version,
    accessDomains: new Set(domains),
    assetTypes,
    relationshipTypes: new Map<string, RelationshipType>(relTypes.map((r) => [r.key, r])),
    propertiesByKey: byKey,
    assetType,
    validator(key: string): PropertiesValidator {
      let validate = validators.get(key)
      if (!validate) {
        validate = compilePropertiesValidator(assetType(key))
        validators.set(key, validate)
      }
      return validate
    },
  }
}

/**
 * Per-organization metamodel cache. Entries are dropped when `kbis_invalidate` arrives (a setup
 * change in this or another process), so reads never query the metamodel tables.
 */
export class MetamodelCache {
  private readonly entries = new Map<string, Promise<LoadedMetamodel>>()

  constructor(private readonly db: Db) {}

  get(orgId: string): Promise<LoadedMetamodel> {
    let entry = this.entries.get(orgId)
    if (!entry) {
      entry = load(this.db, orgId)
      entry.catch(() => this.entries.delete(orgId))
      this.entries.set(orgId, entry)
    }
    return entry
  }

  invalidate(orgId?: string): void {
    if (orgId) this.entries.delete(orgId)
    else this.entries.clear()
  }
}
