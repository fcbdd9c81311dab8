import type { AssetType, Metamodel, PropertyDefinition, PropertyType } from '../../../src/metamodel/types.js'
import { AppError } from '../../../src/core/errors.js'

export const ORG_ID = '0190b3b0-0000-7000-8000-000000000001'

function prop(assetType: string, key: string, type: PropertyType, options: string[] | null = null): PropertyDefinition {
  return { key, asset_type_key: assetType, name: key, description: null, type, required: false, options, currency: null, min: null, max: null }
}

/**
 * server: hostname unique_key, environment select, cpu_count integer, memory_gb number,
 * purchased_on date, tags multi_select, managed boolean, owner text.
 * rack: `size` is a number here while `size` is text on `cable` (one key, two kinds).
 */
export function givenMetamodel(): Metamodel {
  const server: AssetType = {
    key: 'server', name: 'Server', description: null, unique_property_key: 'hostname',
    properties: [
      prop('server', 'hostname', 'unique_key'),
      prop('server', 'environment', 'select', ['dev', 'staging', 'prod']),
      prop('server', 'cpu_count', 'integer'),
      prop('server', 'memory_gb', 'number'),
      prop('server', 'purchased_on', 'date'),
      prop('server', 'tags', 'multi_select', ['web', 'db', 'cache']),
      prop('server', 'managed', 'boolean'),
      prop('server', 'owner', 'text'),
    ],
  }
  // `size` and `kind` mean different kinds on two types: a number and a text, a select and a multi-select.
  const rack: AssetType = { key: 'rack', name: 'Rack', description: null, unique_property_key: null, properties: [prop('rack', 'size', 'integer'), prop('rack', 'kind', 'select', ['a', 'b']), prop('rack', 'price', 'currency')] }
  const cable: AssetType = { key: 'cable', name: 'Cable', description: null, unique_property_key: null, properties: [prop('cable', 'size', 'text'), prop('cable', 'kind', 'multi_select', ['a', 'b'])] }
  const types = [server, rack, cable]
  const byKey = new Map<string, PropertyDefinition[]>()
  for (const def of types.flatMap((t) => t.properties)) byKey.set(def.key, [...(byKey.get(def.key) ?? []), def])
  return {
    orgId: ORG_ID,
    version: 1,
    assetTypes: new Map(types.map((t) => [t.key, t])),
    relationshipTypes: new Map([['runs_on', { key: 'runs_on', name: 'Runs on', description: null, source_asset_type_keys: [], target_asset_type_keys: [] }]]),
    propertiesByKey: byKey,
  }
}

/** Runs `action` and returns what it threw as {status, code, issues}, for exact assertions. */
export function caught(action: () => unknown): { status: number; code: string; issues: AppError['issues'] } {
  try {
    action()
  } catch (err) {
    if (err instanceof AppError) return { status: err.status, code: err.def.code, issues: err.issues }
    throw err
  }
  throw new Error('expected an AppError, nothing was thrown')
}
