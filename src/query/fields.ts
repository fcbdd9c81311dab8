import { definitionsOf } from './asset-types.js'
import type { Metamodel, ValueKind } from '../metamodel/types.js'
import { valueKindOf } from '../metamodel/types.js'
import type { Operator } from './ast.js'

/**
 * The whitelist of fields that filters and sorts may name. Nothing outside these maps and the
 * metamodel's property keys ever reaches SQL as an identifier.
 */

export type Target = 'assets' | 'relationships'

/** A property's value kind, or the type of a system column. */
export type FieldType = ValueKind | 'uuid' | 'datetime'

export type SystemColumn =
  | 'id' | 'asset_type_key' | 'name' | 'access_domain_key' | 'created_at' | 'updated_at'
  | 'relationship_type_key' | 'source_asset_id' | 'target_asset_id'

export interface ColumnField {
  readonly kind: 'column'
  readonly column: SystemColumn
  readonly type: FieldType
  readonly nullable: boolean
  /** Names an asset: accepts a composite key `{asset_type_key}:{unique_property_key}:{value}`. */
  readonly assetRef: boolean
}

export interface PropertyField {
  readonly kind: 'property'
  readonly key: string
  readonly type: ValueKind
  /** Present when every definition of the key with this kind holds whole numbers (integer, score). */
  readonly integer?: true
}

export type ResolvedField = ColumnField | PropertyField

export type RelatedEnd = 'source' | 'target'

function column(name: SystemColumn, type: FieldType, nullable = false, assetRef = false): [string, ColumnField] {
  return [name, Object.freeze({ kind: 'column', column: name, type, nullable, assetRef })]
}

const COLUMNS: Readonly<Record<Target, ReadonlyMap<string, ColumnField>>> = {
  assets: new Map([
    column('id', 'uuid', false, true), column('asset_type_key', 'text'), column('name', 'text'),
    column('access_domain_key', 'text', true), column('created_at', 'datetime'), column('updated_at', 'datetime'),
  ]),
  relationships: new Map([
    column('id', 'uuid'), column('relationship_type_key', 'text'),
    column('source_asset_id', 'uuid', false, true), column('target_asset_id', 'uuid', false, true),
    column('created_at', 'datetime'), column('updated_at', 'datetime'),
  ]),
}

/** Fields of `filter[<field>]` on GET lists (CONTRACT §3); `properties.<key>` too on assets. */
export const LIST_FILTER_COLUMNS: Readonly<Record<Target, readonly string[]>> = {
  assets: ['id', 'asset_type_key', 'name', 'access_domain_key'],
  relationships: ['relationship_type_key', 'source_asset_id', 'target_asset_id'],
}

/** A system column of `target` by its API name. */
export function columnField(target: Target, name: string): ColumnField | undefined {
  return COLUMNS[target].get(name)
}

/** Every column is sortable; properties too on assets. */
export function sortableFieldsText(target: Target): string {
  const columns = [...COLUMNS[target].keys()].join(', ')
  return target === 'assets' ? `${columns}, properties.<key>` : columns
}

const TEXT_OPERATORS: readonly Operator[] = [
  'equals', 'not_equals', 'contains', 'not_contains', 'starts_with', 'in', 'not_in', 'is_empty', 'is_not_empty',
]
const ORDERED_OPERATORS: readonly Operator[] = [
  'equals', 'not_equals', 'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals',
  'in', 'not_in', 'is_empty', 'is_not_empty',
]

/** Operator × type: what each type of field accepts (src/query/README.md has the table). */
export const OPERATORS_BY_TYPE: Readonly<Record<FieldType, readonly Operator[]>> = {
  text: TEXT_OPERATORS,
  number: ORDERED_OPERATORS,
  date: ORDERED_OPERATORS,
  datetime: ['equals', 'not_equals', 'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals'],
  boolean: ['equals', 'not_equals', 'is_empty', 'is_not_empty'],
  multi: ['includes', 'not_includes', 'is_empty', 'is_not_empty'],
  uuid: ['equals', 'not_equals', 'in', 'not_in'],
}

export function operatorFits(type: FieldType, operator: Operator): boolean {
  return OPERATORS_BY_TYPE[type].includes(operator)
}

/** How errors name a type: `number field properties.cpu_count`. */
export const TYPE_NAMES: Readonly<Record<FieldType, string>> = {
  text: 'text', number: 'number', date: 'date', datetime: 'timestamp', boolean: 'boolean',
  multi: 'multi-select', uuid: 'UUID',
}

export const PROPERTY_PREFIX = 'properties.'
const RELATED_PREFIXES: readonly (readonly [string, RelatedEnd])[] = [['source_asset.', 'source'], ['target_asset.', 'target']]

/**
 * A field name checked against the whitelist: the candidate readings of it (one, except for a
 * property key defined with different value kinds on different asset types) and, for
 * `source_asset.*` / `target_asset.*` on relationships, the end it reaches.
 */
export interface FieldRef {
  readonly name: string
  readonly end: RelatedEnd | null
  readonly candidates: readonly ResolvedField[]
}

/** Looks a field name up; `null` when it names nothing filterable on `target`. */
export function lookupField(name: string, target: Target, metamodel: Metamodel): FieldRef | null {
  if (target === 'relationships') {
    for (const [prefix, end] of RELATED_PREFIXES) {
      if (!name.startsWith(prefix)) continue
      const inner = lookupField(name.slice(prefix.length), 'assets', metamodel)
      return inner === null ? null : { name, end, candidates: inner.candidates }
    }
  }
  const col = COLUMNS[target].get(name)
  if (col !== undefined) return { name, end: null, candidates: [col] }
  if (target !== 'assets' || !name.startsWith(PROPERTY_PREFIX)) return null
  const candidates = propertyFields(name.slice(PROPERTY_PREFIX.length), metamodel)
  return candidates.length === 0 ? null : { name, end: null, candidates }
}

/**
 * One candidate per distinct value kind of the key, in the metamodel's order; with `types`, of
 * the definitions on those asset types (query/asset-types.ts `definitionsOf`). Keys come only from
 * `propertiesByKey`, so a hostile name finds nothing and never reaches SQL.
 */
export function propertyFields(key: string, metamodel: Metamodel, types: ReadonlySet<string> | null = null): PropertyField[] {
  const defs = definitionsOf(metamodel, key, types)
  const kinds = new Set(defs.map((def) => valueKindOf(def.type)))
  return [...kinds].map((type) => {
    const integer = type === 'number' && defs.every((def) => valueKindOf(def.type) !== 'number' || WHOLE_NUMBER_TYPES.has(def.type))
    return Object.freeze({ kind: 'property' as const, key, type, ...(integer ? { integer: true as const } : {}) })
  })
}

/** Property types whose values are whole numbers: a filter value of 1.5 is of the wrong type there. */
const WHOLE_NUMBER_TYPES: ReadonlySet<string> = new Set(['integer', 'score'])

/** `number field properties.cpu_count`, or `number or text field properties.size`. */
export function describeField(ref: FieldRef, candidates: readonly ResolvedField[] = ref.candidates): string {
  return `${candidates.map((c) => TYPE_NAMES[c.type]).join(' or ')} field ${ref.name}`
}

/** The filterable fields of a target, for "unknown field" details. */
export function filterFieldsText(target: Target): string {
  const columns = [...COLUMNS[target].keys()].join(', ')
  return target === 'assets'
    ? `${columns}, properties.<key>`
    : `${columns}, source_asset.<asset field>, target_asset.<asset field>`
}

/** The fields of `filter[<field>]` on a GET list, for "unknown field" details. */
export function listFieldsText(target: Target): string {
  const columns = LIST_FILTER_COLUMNS[target].join(', ')
  return target === 'assets' ? `${columns}, properties.<key>` : columns
}
