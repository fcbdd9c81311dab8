import type { PropertyType } from '../metamodel/types.js'
import { DEFAULT_SCORE_BOUNDS } from './normalize.js'
import type { AssetTypeSpec, PropertySpec, SetupFile } from './types.js'

/** ISO 4217 codes known to the runtime (Node's ICU). */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'))

const WITH_OPTIONS: readonly PropertyType[] = ['select', 'multi_select']
const WITH_BOUNDS: readonly PropertyType[] = ['number', 'integer', 'currency', 'score']
const INTEGER_BOUNDS: readonly PropertyType[] = ['integer', 'score']

/** `path: item "x" appears twice` for the first repeated value, else null. */
function firstDuplicate<T>(items: readonly T[] | undefined, value: (item: T) => string, path: string, field: string): string | null {
  const seen = new Set<string>()
  for (const [i, item] of (items ?? []).entries()) {
    const v = value(item)
    if (seen.has(v)) return `${path}[${i}].${field}: ${v} is listed twice`
    seen.add(v)
  }
  return null
}

function duplicates(setup: SetupFile): string | null {
  const types = setup.metamodel?.asset_types
  return (
    firstDuplicate(setup.access_domains, (d) => d.key, 'access_domains', 'key') ??
    firstDuplicate(setup.roles, (r) => r.key, 'roles', 'key') ??
    firstDuplicate(setup.users, (u) => u.email, 'users', 'email') ??
    firstDuplicate(types, (t) => t.key, 'metamodel.asset_types', 'key') ??
    (types ?? []).reduce<string | null>(
      (found, t, i) => found ?? firstDuplicate(t.properties, (p) => p.key, `metamodel.asset_types[${i}].properties`, 'key'),
      null,
    ) ??
    firstDuplicate(setup.metamodel?.relationship_types, (t) => t.key, 'metamodel.relationship_types', 'key')
  )
}

function grants(setup: SetupFile): string | null {
  for (const [r, role] of (setup.roles ?? []).entries()) {
    for (const [g, grant] of role.grants.entries()) {
      if (grant.asset_type_keys.includes('*') && grant.asset_type_keys.length > 1) {
        return `roles[${r}].grants[${g}].asset_type_keys: "*" must stand alone`
      }
    }
  }
  return null
}

function optionsAndCurrency(p: PropertySpec): [field: string, message: string] | null {
  const hasOptions = WITH_OPTIONS.includes(p.type)
  if (hasOptions && p.options === null) return ['options', `is required for type ${p.type}`]
  if (!hasOptions && p.options !== null) return ['options', 'is only allowed for types select and multi_select']
  // CSV (GET /export/assets, kbis import) joins a multi-select's options with `|`: one holding it
  // would come back as two.
  const piped = p.type === 'multi_select' ? (p.options ?? []).findIndex((o) => o.includes('|')) : -1
  if (piped >= 0) return [`options[${piped}]`, `${JSON.stringify(p.options![piped])} holds |, which joins the options of a multi_select in CSV files`]
  if (p.type === 'currency' && p.currency === null) return ['currency', 'is required for type currency']
  if (p.type !== 'currency' && p.currency !== null) return ['currency', 'is only allowed for type currency']
  if (p.currency !== null && !CURRENCIES.has(p.currency)) return ['currency', `${p.currency} is not an ISO 4217 currency code`]
  return null
}

function bounds(p: PropertySpec): [field: string, message: string] | null {
  for (const field of ['min', 'max'] as const) {
    const value = p[field]
    if (value === null) continue
    if (!WITH_BOUNDS.includes(p.type)) return [field, 'is only allowed for types number, integer, currency and score']
    if (INTEGER_BOUNDS.includes(p.type) && !Number.isInteger(value)) return [field, `must be an integer for type ${p.type}`]
  }
  const score = p.type === 'score'
  const min = p.min ?? (score ? DEFAULT_SCORE_BOUNDS.min : null)
  const max = p.max ?? (score ? DEFAULT_SCORE_BOUNDS.max : null)
  if (min !== null && max !== null && min > max) return [p.min !== null ? 'min' : 'max', `min ${min} is greater than max ${max}`]
  return null
}

function assetType(type: AssetTypeSpec, path: string): string | null {
  let uniqueKey: string | null = null
  for (const [i, p] of type.properties.entries()) {
    const at = `${path}.properties[${i}]`
    const problem = optionsAndCurrency(p) ?? bounds(p)
    if (problem) return `${at}.${problem[0]}: ${problem[1]}`
    if (p.type !== 'unique_key') continue
    if (uniqueKey !== null) return `${at}.type: asset type ${type.key} already has the unique_key property ${uniqueKey}`
    uniqueKey = p.key
  }
  return null
}

/**
 * Rules JSON Schema does not express: repeated keys, a lone "*", fields that belong to some
 * property types only, bounds in order, one unique_key per asset type. The first problem, or null.
 */
export function checkRules(setup: SetupFile): string | null {
  const found = duplicates(setup) ?? grants(setup)
  if (found) return found
  for (const [i, type] of (setup.metamodel?.asset_types ?? []).entries()) {
    const problem = assetType(type, `metamodel.asset_types[${i}]`)
    if (problem) return problem
  }
  return null
}
