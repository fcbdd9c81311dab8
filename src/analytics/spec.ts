import { Errors } from '../core/errors.js'
import { valueKindOf, type Metamodel, type ValueKind } from '../metamodel/types.js'
import { parseFilter } from '../query/parse.js'
import { resolveFilter, type ResolvedNode } from '../query/resolve.js'
import { assetTypesOf, readingTypes } from '../query/asset-types.js'
import { PROPERTY_PREFIX } from '../query/fields.js'
import { checkMembers, failAt, isObject } from '../core/json.js'

/**
 * Stage 1 of analytics: the body (CONTRACT §7) checked against the metamodel into an
 * {@link AnalyticsSpec}. Pure. Errors are 400 with a pointer into the body: `invalid_filter` for
 * the filter (the search compiler's), `invalid_request` for everything else — among them a
 * sum/average on a field that is not a number or integer property.
 */

export const INTERVALS = ['day', 'week', 'month', 'quarter', 'year'] as const
export type Interval = (typeof INTERVALS)[number]

export type SystemField = 'id' | 'asset_type_key' | 'name' | 'access_domain_key' | 'created_at' | 'updated_at'

/** A value read from one asset. A property carries every value kind its key has in the metamodel. */
export type AnalyticsField =
  | { readonly kind: 'column'; readonly column: SystemField; readonly timestamp: boolean }
  | { readonly kind: 'property'; readonly key: string; readonly kinds: readonly ValueKind[] }

export type Dimension =
  | { readonly kind: 'field'; readonly name: string; readonly field: AnalyticsField; readonly interval: Interval | null }
  | { readonly kind: 'related'; readonly name: string; readonly relationshipTypeKey: string | null; readonly direction: 'outgoing' | 'incoming' }

export type MeasureType = 'count' | 'count_distinct' | 'sum' | 'average'

export type Measure =
  | { readonly type: 'count'; readonly name: string }
  | { readonly type: 'count_distinct' | 'sum' | 'average'; readonly name: string; readonly field: AnalyticsField }

export interface AnalyticsSpec {
  readonly filter: ResolvedNode
  readonly measures: readonly Measure[]
  readonly groupBy: readonly Dimension[]
  readonly breakdown: Dimension | null
}

const MEMBERS = ['filter', 'measures', 'group_by', 'breakdown_by']
const MEASURE_TYPES: readonly MeasureType[] = ['count', 'count_distinct', 'sum', 'average']
const SYSTEM_FIELDS: readonly SystemField[] = ['id', 'asset_type_key', 'name', 'access_domain_key', 'created_at', 'updated_at']
/** More group levels than this is surely a mistake; each one multiplies the groups. */
export const MAX_GROUP_BY = 10
/**
 * Measures per request: each is a column of every group and breakdown entry (an outside probe
 * made 85 KB of 1,600 measures answer 135 MB; PostgreSQL refuses a statement of more than 1,664
 * columns, which answered 500).
 */
export const MAX_MEASURES = 20

function bad(pointer: string, detail: string): never {
  return failAt(Errors.INVALID_REQUEST, pointer, detail)
}

/**
 * @example parseAnalytics({measures: [{type: 'average', field: 'properties.memory_gb'}], group_by: ['properties.environment']}, mm)
 *   // → {filter: MATCH_ALL, measures: [{type: 'average', name: 'average:properties.memory_gb', field: {kind: 'property', key: 'memory_gb', kinds: ['number']}}],
 *   //    groupBy: [{kind: 'field', name: 'properties.environment', field: {…, kinds: ['text']}, interval: null}], breakdown: null}
 */
export function parseAnalytics(body: unknown, metamodel: Metamodel): AnalyticsSpec {
  const json = body ?? {}
  if (!isObject(json)) bad('', 'the body must be a JSON object {filter, measures, group_by, breakdown_by}')
  checkMembers(json, MEMBERS)
  const parsedFilter = parseFilter(json.filter, '/filter')
  const filter = resolveFilter(parsedFilter, 'assets', metamodel)
  // A key that asset types define with different kinds is read as the types filtered for define it.
  const fields = readingTypes(metamodel, assetTypesOf(parsedFilter))
  const measures = parseMeasures(json.measures, fields)
  const groupBy = parseGroupBy(json.group_by, fields)
  const breakdown = json.breakdown_by === undefined || json.breakdown_by === null
    ? null
    : parseDimension(json.breakdown_by, '/breakdown_by', fields)
  return Object.freeze({ filter, measures, groupBy, breakdown })
}

function parseMeasures(value: unknown, metamodel: Metamodel): Measure[] {
  if (value === undefined || value === null) return [{ type: 'count', name: 'count' }]
  if (!Array.isArray(value) || value.length === 0) bad('/measures', 'measures must be a non-empty array of {"type", "field", "as"}')
  if (value.length > MAX_MEASURES) bad('/measures', `measures takes at most ${MAX_MEASURES} measures; this one has ${value.length}`)
  const names = new Set<string>()
  return value.map((entry: unknown, i) => {
    const measure = parseMeasure(entry, `/measures/${i}`, metamodel)
    if (names.has(measure.name)) bad(`/measures/${i}`, `two measures are named ${JSON.stringify(measure.name)}; rename one with "as"`)
    names.add(measure.name)
    return measure
  })
}

function parseMeasure(entry: unknown, at: string, metamodel: Metamodel): Measure {
  if (!isObject(entry)) bad(at, 'a measure is an object {"type", "field", "as"}')
  checkMembers(entry, ['type', 'field', 'as'], at)
  const { type, field, as } = entry
  if (!MEASURE_TYPES.includes(type as MeasureType)) bad(`${at}/type`, `type must be one of ${MEASURE_TYPES.join(', ')}`)
  if (as !== undefined && (typeof as !== 'string' || as === '')) bad(`${at}/as`, 'as must be a non-empty string')
  if (type === 'count') {
    if (field !== undefined) bad(`${at}/field`, 'count takes no field; count_distinct counts the distinct values of one')
    return { type, name: (as as string | undefined) ?? 'count' }
  }
  if (typeof field !== 'string') bad(`${at}/field`, `${String(type)} needs a field`)
  const resolved = parseField(field, `${at}/field`, metamodel)
  if (type === 'sum' || type === 'average') checkSummable(type, field, resolved, metamodel, `${at}/field`)
  return { type: type as 'count_distinct' | 'sum' | 'average', name: (as as string | undefined) ?? `${String(type)}:${field}`, field: resolved }
}

/** Property types `sum` and `average` take (CONTRACT §7: "only on number and integer properties (400 otherwise)"). */
const SUMMABLE_TYPES: ReadonlySet<string> = new Set(['number', 'integer'])

/**
 * A sum or average needs a property that every asset type in reach defines as `number` or
 * `integer`. A key of mixed kinds is read as text (docs/analytics.md); currency, percentage and
 * score hold numbers but are refused, as the CONTRACT's letter says.
 */
function checkSummable(type: 'sum' | 'average', name: string, field: AnalyticsField, metamodel: Metamodel, at: string): void {
  if (field.kind !== 'property') bad(at, `${type} needs a number or integer property; ${name} is not one`)
  const defs = metamodel.propertiesByKey.get(field.key) ?? []
  const other = defs.find((d) => !SUMMABLE_TYPES.has(d.type))
  if (other === undefined) return
  if (field.kinds.length > 1 && field.kinds.includes('number')) {
    bad(at, `${type} needs a number or integer property; ${name} is a number on some asset types and not on others, so it is read as text: filter asset_type_key to the types where it is a number or an integer`)
  }
  bad(at, valueKindOf(other.type) === 'number'
    ? `${type} takes number and integer properties only (not currency, percentage or score); ${name} is a ${other.type} property of ${other.asset_type_key}`
    : `${type} needs a number or integer property; ${name} is not one`)
}

/** `asset_type_key`, `created_at`, … or `properties.<key>` of a key some asset type defines. */
function parseField(name: string, at: string, metamodel: Metamodel): AnalyticsField {
  if ((SYSTEM_FIELDS as readonly string[]).includes(name)) {
    const column = name as SystemField
    return { kind: 'column', column, timestamp: column === 'created_at' || column === 'updated_at' }
  }
  if (name.startsWith(PROPERTY_PREFIX)) {
    const key = name.slice(PROPERTY_PREFIX.length)
    const defs = metamodel.propertiesByKey.get(key) ?? []
    if (defs.length > 0) return { kind: 'property', key, kinds: [...new Set(defs.map((d) => valueKindOf(d.type)))] }
    bad(at, `unknown property ${JSON.stringify(key)}: no asset type in the metamodel defines it`)
  }
  return bad(at, `unknown field ${JSON.stringify(name)}; fields are ${SYSTEM_FIELDS.join(', ')}, properties.<key>`)
}

function parseGroupBy(value: unknown, metamodel: Metamodel): Dimension[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) bad('/group_by', 'group_by must be an array of fields or {"field", …} objects')
  if (value.length > MAX_GROUP_BY) bad('/group_by', `group_by takes at most ${MAX_GROUP_BY} fields`)
  const names = new Set<string>()
  return value.map((entry: unknown, i) => {
    const dimension = parseDimension(entry, `/group_by/${i}`, metamodel)
    if (names.has(dimension.name)) bad(`/group_by/${i}`, `two groupings are named ${JSON.stringify(dimension.name)}; rename one with "as"`)
    names.add(dimension.name)
    return dimension
  })
}

const DIMENSION_MEMBERS = ['field', 'interval', 'relationship_type_key', 'direction', 'as']

/**
 * `"properties.environment"`, `{"field": "created_at", "interval": "month"}` or
 * `{"field": "related_asset_type_key", "relationship_type_key": "runs_on", "direction": "outgoing"}`.
 * The group key in the response is the field (or `as`).
 */
export function parseDimension(entry: unknown, at: string, metamodel: Metamodel): Dimension {
  const json = typeof entry === 'string' ? { field: entry } : entry
  if (!isObject(json)) bad(at, 'a grouping is a field name or an object {"field", "interval" | "relationship_type_key", "direction", "as"}')
  checkMembers(json, DIMENSION_MEMBERS, at)
  const pointer = (member: string): string => (typeof entry === 'string' ? at : `${at}/${member}`)
  if (typeof json.field !== 'string' || json.field === '') bad(pointer('field'), 'field must be a non-empty string')
  if (json.as !== undefined && (typeof json.as !== 'string' || json.as === '')) bad(pointer('as'), 'as must be a non-empty string')
  const name = (json.as as string | undefined) ?? json.field
  if (json.field === 'related_asset_type_key') return parseRelated(json, name, pointer, metamodel)
  if (json.relationship_type_key !== undefined || json.direction !== undefined) {
    bad(pointer('field'), 'relationship_type_key and direction go with the field related_asset_type_key')
  }
  const field = parseField(json.field, pointer('field'), metamodel)
  return { kind: 'field', name, field, interval: parseInterval(field, json.interval, pointer) }
}

function parseRelated(json: Record<string, unknown>, name: string, pointer: (m: string) => string, metamodel: Metamodel): Dimension {
  const { relationship_type_key: type, direction = 'outgoing' } = json
  if (json.interval !== undefined) bad(pointer('interval'), 'related_asset_type_key takes no interval')
  if (type !== undefined && (typeof type !== 'string' || !metamodel.relationshipTypes.has(type))) {
    bad(pointer('relationship_type_key'), `unknown relationship type ${JSON.stringify(type)}`)
  }
  if (direction !== 'outgoing' && direction !== 'incoming') bad(pointer('direction'), 'direction must be "outgoing" or "incoming"')
  return { kind: 'related', name, relationshipTypeKey: (type as string | undefined) ?? null, direction }
}

/** Timestamps need an interval; date properties may have one; nothing else takes one. */
function parseInterval(field: AnalyticsField, value: unknown, pointer: (m: string) => string): Interval | null {
  const datelike = field.kind === 'column' ? field.timestamp : field.kinds.length === 1 && field.kinds[0] === 'date'
  if (value === undefined || value === null) {
    if (field.kind === 'column' && field.timestamp) {
      bad(pointer('field'), `${field.column} is grouped by an interval: {"field": "${field.column}", "interval": "${INTERVALS.join('" | "')}"}`)
    }
    return null
  }
  if (!datelike) bad(pointer('interval'), 'interval goes with created_at, updated_at and date properties')
  if (!INTERVALS.includes(value as Interval)) bad(pointer('interval'), `interval must be one of ${INTERVALS.join(', ')}`)
  return value as Interval
}
