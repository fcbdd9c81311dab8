import { newId } from '../core/time.js'
import type { Issue } from '../core/errors.js'
import type { LoadedMetamodel } from '../metamodel/service.js'
import type { AssetChange, NewAssetRow } from './sql.js'
import type { AssetRow } from './mapper.js'

/** Body of POST /assets (and of each POST /bulk/assets item). */
export interface AssetInput {
  asset_type_key: string
  name: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
  relationships?: unknown
}

/** Body of PATCH /assets/{id} (and of each PATCH /bulk/assets item). */
export interface AssetPatch {
  asset_type_key?: string
  name?: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
  relationships?: unknown
}

/** A property set to null means "no value": such keys are dropped, never stored. */
function withoutNulls(properties: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(properties)) if (value !== null) out[key] = value
  return out
}

function uniqueValueOf(metamodel: LoadedMetamodel, typeKey: string, properties: Record<string, unknown>): string | null {
  const key = metamodel.assetTypes.get(typeKey)?.unique_property_key
  const value = key ? properties[key] : undefined
  return typeof value === 'string' ? value : null
}

function checkDomain(metamodel: LoadedMetamodel, domain: string | null, pointer: string): Issue[] {
  if (domain === null || metamodel.accessDomains.has(domain)) return []
  return [{ detail: `unknown access domain ${domain}`, pointer }]
}

/**
 * Validates a new asset against the metamodel without touching the store. Every problem is
 * returned (not only the first) so that bulk requests can list all of them.
 */
export function prepareNewAsset(metamodel: LoadedMetamodel, input: AssetInput, base = ''): { row: NewAssetRow; issues: Issue[] } {
  const properties = withoutNulls(input.properties ?? {})
  const domain = input.access_domain_key ?? null
  const issues: Issue[] = []
  const type = metamodel.assetTypes.get(input.asset_type_key)
  if (!type) issues.push({ detail: `unknown asset type ${input.asset_type_key}`, pointer: `${base}/asset_type_key` })
  else issues.push(...metamodel.validator(type.key)(properties, `${base}/properties`))
  issues.push(...checkDomain(metamodel, domain, `${base}/access_domain_key`))
  return {
    row: {
      id: newId(),
      asset_type_key: input.asset_type_key,
      name: input.name,
      access_domain_key: domain,
      properties,
      unique_value: type ? uniqueValueOf(metamodel, type.key, properties) : null,
    },
    issues,
  }
}

/**
 * Applies a PATCH to an existing asset: `properties` merge key by key, a key set to null clears
 * it, and the merged whole is validated (so required properties stay required).
 */
export function prepareAssetChange(
  metamodel: LoadedMetamodel,
  existing: AssetRow,
  patch: AssetPatch,
  base = '',
): { change: AssetChange; issues: Issue[] } {
  const issues: Issue[] = []
  if (patch.asset_type_key !== undefined && patch.asset_type_key !== existing.asset_type_key) {
    issues.push({ detail: 'asset_type_key cannot change', pointer: `${base}/asset_type_key` })
  }
  const properties = withoutNulls({ ...existing.properties, ...(patch.properties ?? {}) })
  if (patch.properties !== undefined) {
    issues.push(...metamodel.validator(existing.asset_type_key)(properties, `${base}/properties`))
  }
  const domain = patch.access_domain_key === undefined ? existing.access_domain_key : patch.access_domain_key
  if (patch.access_domain_key !== undefined) issues.push(...checkDomain(metamodel, domain, `${base}/access_domain_key`))
  return {
    change: {
      id: existing.id,
      name: patch.name ?? existing.name,
      access_domain_key: domain,
      properties,
      unique_value: uniqueValueOf(metamodel, existing.asset_type_key, properties),
    },
    issues,
  }
}
