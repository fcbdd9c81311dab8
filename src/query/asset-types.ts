import type { Metamodel, PropertyDefinition } from '../metamodel/types.js'
import type { FilterNode } from './ast.js'

/**
 * The asset types a filter restricts its matches to, read from its `asset_type_key` conditions
 * (`equals` a string, `in` a list of strings), or null when it may match assets of any type. An
 * `and` keeps the types every restricting child allows; an `or` restricts only when each branch
 * does, to the types of all of them. Anything else (other fields, negations, values the resolve
 * stage will refuse) restricts nothing. Sorting and analytics read a property key that several
 * asset types define with different kinds by the definitions of these types only
 * ({@link definitionsOf}).
 *
 * @example assetTypesOf({kind: 'and', children: [{kind: 'condition', field: 'asset_type_key', operator: 'in', value: ['rack', 'cable']}, …]}) → Set {rack, cable}
 */
export function assetTypesOf(node: FilterNode | null): ReadonlySet<string> | null {
  if (node === null) return null
  if (node.kind === 'condition') {
    if (node.field !== 'asset_type_key') return null
    if (node.operator === 'equals' && typeof node.value === 'string') return new Set([node.value])
    if (node.operator === 'in' && Array.isArray(node.value) && node.value.every((v) => typeof v === 'string')) return new Set(node.value as string[])
    return null
  }
  const sets = node.children.map(assetTypesOf)
  if (node.kind === 'or') {
    if (sets.some((s) => s === null)) return null
    return new Set(sets.flatMap((s) => [...s!]))
  }
  const restricting = sets.filter((set): set is ReadonlySet<string> => set !== null)
  if (restricting.length === 0) return null
  const [first, ...rest] = restricting
  return new Set([...first!].filter((t) => rest.every((set) => set.has(t))))
}

/**
 * The definitions of property `key` on these asset types (every type's when `types` is null), or
 * every definition when none of them defines it: their assets then hold no value of the key, and
 * any reading of it is empty.
 */
export function definitionsOf(metamodel: Metamodel, key: string, types: ReadonlySet<string> | null): readonly PropertyDefinition[] {
  const all = metamodel.propertiesByKey.get(key) ?? []
  if (types === null) return all
  const defs = all.filter((def) => types.has(def.asset_type_key))
  return defs.length > 0 ? defs : all
}

/**
 * The metamodel as a request restricted to `types` reads property keys: each key's definitions on
 * those types ({@link definitionsOf}); the metamodel itself when `types` is null.
 */
export function readingTypes(metamodel: Metamodel, types: ReadonlySet<string> | null): Metamodel {
  if (types === null) return metamodel
  const byKey = new Map([...metamodel.propertiesByKey.keys()].map((key) => [key, definitionsOf(metamodel, key, types)] as const))
  return { ...metamodel, propertiesByKey: byKey }
}
