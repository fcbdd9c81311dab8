import { newId } from '../core/time.js'
import type { Issue } from '../core/errors.js'
import type { LoadedMetamodel } from '../metamodel/service.js'
import { compilePropertiesValidator, unknownPropertyIssue, type PropertiesValidator } from '../metamodel/validate.js'
import type { NewAssetRow } from './sql.js'
import { pushAll } from '../core/arrays.js'

/** Body of POST /assets (and of each POST /bulk/assets item). */
export interface AssetInput {
  asset_type_key: string
  name: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
  relationships?: unknown
}

/** Body of PATCH /assets/{id} (and of each PATCH /bulk/assets item, where asset_type_key is not accepted). */
export interface AssetPatch {
  asset_type_key?: string
  name?: string
  access_domain_key?: string | null
  properties?: Record<string, unknown>
  relationships?: unknown
}

/**
 * A property set to null means "no value": such keys are dropped, never stored. Without any
 * null the object itself is returned (nothing here or after it changes a request's properties).
 */
function withoutNulls(properties: Record<string, unknown>): Record<string, unknown> {
  let hasNull = false
  for (const key in properties) if (properties[key] === null) hasNull = true
  if (!hasNull) return properties
  const out: Record<string, unknown> = {}
  for (const key in properties) if (properties[key] !== null) out[key] = properties[key]
  return out
}

/**
 * The keys set to null that the type does not define: null clears a property, it does not make
 * an unknown key acceptable (CONTRACT §2: unknown property key → 422), however it is spelt.
 */
function unknownNulls(metamodel: LoadedMetamodel, typeKey: string, properties: Record<string, unknown>, pointer: string): Issue[] {
  const type = metamodel.assetTypes.get(typeKey)
  if (!type) return []
  const issues: Issue[] = []
  for (const key in properties) {
    if (properties[key] === null && !type.properties.some((p) => p.key === key)) issues.push(unknownPropertyIssue(type, key, pointer))
  }
  return issues
}

function uniqueValueOf(metamodel: LoadedMetamodel, typeKey: string, properties: Record<string, unknown>): string | null {
  const key = metamodel.assetTypes.get(typeKey)?.unique_property_key
  const value = key ? properties[key] : undefined
  return typeof value === 'string' ? value : null
}

export function checkDomain(metamodel: LoadedMetamodel, domain: string | null, pointer: string): Issue[] {
  if (domain === null || metamodel.accessDomains.has(domain)) return []
  // "" names no domain: say what does (the detail read `unknown access domain ` with nothing after it).
  if (domain === '') return [{ detail: 'access_domain_key must not be empty: null (or leaving it out) means no access domain', pointer }]
  return [{ detail: `unknown access domain ${domain}`, pointer }]
}

/**
 * Validates a new asset against the metamodel without touching the store. Every problem is
 * returned (not only the first) so that bulk requests can list all of them.
 */
export function prepareNewAsset(metamodel: LoadedMetamodel, input: AssetInput, base = ''): { row: NewAssetRow; issues: Issue[] } {
  const { values, issues } = prepareAssetValues(metamodel, input, base)
  return { row: { id: newId(), ...values }, issues }
}

/** prepareNewAsset's checks and values without a new id: what replacing a stored asset writes. */
export function prepareAssetValues(metamodel: LoadedMetamodel, input: AssetInput, base = ''): { values: Omit<NewAssetRow, 'id'>; issues: Issue[] } {
  const properties = withoutNulls(input.properties ?? {})
  const domain = input.access_domain_key ?? null
  const issues: Issue[] = []
  const type = metamodel.assetTypes.get(input.asset_type_key)
  if (!type) issues.push({ detail: `unknown asset type ${input.asset_type_key}`, pointer: `${base}/asset_type_key` })
  else pushAll(pushAll(issues, metamodel.validator(type.key)(properties, `${base}/properties`)), unknownNulls(metamodel, type.key, input.properties ?? {}, `${base}/properties`))
  pushAll(issues, checkDomain(metamodel, domain, `${base}/access_domain_key`))
  return {
    values: {
      asset_type_key: input.asset_type_key,
      name: input.name,
      access_domain_key: domain,
      properties,
      unique_value: type ? uniqueValueOf(metamodel, type.key, properties) : null,
    },
    issues,
  }
}

// Per metamodel version (a new version is a new LoadedMetamodel object) and asset type.
const patchValidators = new WeakMap<LoadedMetamodel, Map<string, PropertiesValidator>>()

/** The type's validator with no property required (a required one still not empty): it checks the values a patch sets. */
function patchValidator(metamodel: LoadedMetamodel, typeKey: string): PropertiesValidator {
  let byType = patchValidators.get(metamodel)
  if (!byType) patchValidators.set(metamodel, (byType = new Map()))
  let validate = byType.get(typeKey)
  if (!validate) {
    const type = metamodel.assetType(typeKey)
    validate = compilePropertiesValidator(type, true)
    byType.set(typeKey, validate)
  }
  return validate
}

/** A PATCH's `properties`, split into values to set and keys to clear (null). */
export interface PropertiesPatch {
  set: Record<string, unknown>
  clear: string[]
  issues: Issue[]
}

/**
 * Validates a PATCH's `properties` without the stored asset (bulk updates merge in SQL, on the
 * locked row): every value set must fit its property, and a required property may not be
 * cleared. The stored properties fit the metamodel (every write is validated, and `kbis apply`
 * refuses metamodel changes that existing data contradicts), so the merge then fits too: the same
 * verdict, with the same messages, as validating the merged whole.
 */
export function preparePropertiesPatch(metamodel: LoadedMetamodel, typeKey: string, properties: Record<string, unknown>, base = ''): PropertiesPatch {
  const set = withoutNulls(properties)
  const clear = Object.keys(properties).filter((key) => properties[key] === null)
  const issues = patchValidator(metamodel, typeKey)(set, `${base}/properties`)
  pushAll(issues, unknownNulls(metamodel, typeKey, properties, `${base}/properties`))
  for (const key of clear) {
    if (metamodel.assetType(typeKey).properties.some((p) => p.key === key && p.required)) {
      issues.push({ detail: `${key} is required for asset type ${typeKey}`, pointer: `${base}/properties/${key}` })
    }
  }
  return { set, clear, issues }
}
