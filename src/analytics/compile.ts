import type { ValueKind } from '../metamodel/types.js'
import type { AuthContext } from '../core/auth/context.js'
import { assertNever } from '../core/errors.js'
import { scopeCondition, scopeFilter } from '../access/scope.js'
import { compileWhere } from '../query/where.js'
import { projectionStorage } from '../projection/storage.js'
import { columnRef, type Projection } from '../projection/columns.js'
import { ident, literal, Params } from '../store/sql.js'
import type { AnalyticsField, AnalyticsSpec, Dimension, Measure } from './spec.js'

/**
 * Stage 2 of analytics: an {@link AnalyticsSpec} → SQL over the organization's typed projection
 * (alias `a`, live assets only). Pure: values only as `$n`, identifiers only from the projection's
 * column names, interval units from a whitelist. Everything is aggregated by PostgreSQL; no asset
 * row ever reaches the service.
 *
 * - One statement for the groups, and with `breakdown_by` a second one grouped by the groups'
 *   fields plus the breakdown field: a multi-valued breakdown (a multi-select, related types)
 *   would count an asset once per value if both levels shared one GROUPING SETS scan.
 * - Groups come in a fixed order: by each group_by field in turn, ascending, empty values last;
 *   text in byte order, numbers numerically, dates and intervals chronologically, false before true.
 * - Empty values (CONTRACT §4: missing, null, `""`, `[]`) are SQL NULL: the NULL group, never a
 *   distinct value. The projection keeps `""` and `[]` as they are, so a text property is read as
 *   `NULLIF(col, '')`, and a multi-select is unnested (no option, no row).
 * - A count_distinct of a multi-select counts options: `LEFT JOIN LATERAL unnest(col) WITH
 *   ORDINALITY x(v, o)` gives one row per option (one NULL row for none), and every other measure
 *   counts only each asset's first row, `COALESCE(x.o, 1) = 1`, so an asset still counts once.
 *
 * @example group_by environment (a text property), measures count and average(memory_gb):
 *   SELECT NULLIF(s.d0, '') AS g0, COALESCE(sum(s.n), 0) AS m0, sum(s.s1) / NULLIF(sum(s.c1), 0) AS m1
 *   FROM (SELECT a."t_environment" AS d0, count(*) AS n, sum(a."n_memory_gb") AS s1, count(a."n_memory_gb") AS c1
 *         FROM "assets_typed_…" a GROUP BY a."t_environment") s
 *   GROUP BY NULLIF(s.d0, '') ORDER BY NULLIF(s.d0, '') ASC NULLS LAST LIMIT 10001
 */

/** How the service turns a group value from the driver into JSON. */
export type OutputType = 'text' | 'number' | 'boolean'

export interface Statement {
  readonly text: string
  readonly values: readonly unknown[]
}

export interface CompiledAnalytics {
  readonly groups: Statement
  readonly breakdown: Statement | null
  readonly groupTypes: readonly OutputType[]
  readonly breakdownType: OutputType | null
}

export interface AnalyticsContext {
  readonly orgId: string
  readonly auth: AuthContext
  readonly projection: Projection
}

/** Limits on the answer's size: more groups than this is 400 (narrow the filter or the grouping). */
export const MAX_GROUPS = 10_000
export const MAX_BREAKDOWN_ROWS = 100_000

export function compileAnalytics(spec: AnalyticsSpec, ctx: AnalyticsContext): CompiledAnalytics {
  const withBreakdown = spec.breakdown === null ? null : [...spec.groupBy, spec.breakdown]
  return {
    groups: compileLevel(spec, spec.groupBy, ctx, MAX_GROUPS),
    breakdown: withBreakdown === null ? null : compileLevel(spec, withBreakdown, ctx, MAX_BREAKDOWN_ROWS),
    groupTypes: spec.groupBy.map((d) => outputType(d)),
    breakdownType: spec.breakdown === null ? null : outputType(spec.breakdown),
  }
}

interface DimensionSql {
  /** The grouped value, in its own type (ordering uses it). */
  readonly raw: string
  /**
   * A text property's column as stored, when `raw` is `NULLIF(column, '')`: a statement whose
   * measures add up (count, sum, average) groups the rows by the column itself and folds `""`
   * into the NULL group over the few groups left (see {@link twoLevel}).
   */
  readonly stored: string | null
  /** A join the value needs (multi-select values, related asset types). */
  readonly join: string | null
  /** The value as the API shows it, from an expression of the raw value. */
  format(raw: string): string
}

/** One aggregate statement grouped by `dims`; `limit` + 1 rows at most, so the caller can tell. */
function compileLevel(spec: AnalyticsSpec, dims: readonly Dimension[], ctx: AnalyticsContext, limit: number): Statement {
  // The projection holds the organization's rows only: the WHERE has no org_id condition.
  const params = new Params()
  const where = compileWhere({
    target: 'assets', alias: 'a', orgId: ctx.orgId, filter: spec.filter, scope: scopeFilter(ctx.auth, 'view'), storage: projectionStorage(ctx.projection),
  }, params)
  const sql = dims.map((d, i) => dimensionSql(d, i, ctx, params))
  const inputs = measureInputs(spec.measures, ctx.projection)
  const from = [`${ident(ctx.projection.table)} a`, ...sql.flatMap((d) => (d.join === null ? [] : [d.join])), ...inputs.joins].join(' ')
  const source = where === 'TRUE' ? `FROM ${from}` : `FROM ${from} WHERE ${where}`
  const distinct = inputs.distinct.size === 1 ? [...inputs.distinct.values()][0]! : null
  const additive = distinct === null && inputs.distinct.size === 0 && sql.some((d) => d.stored !== null)
  const text = distinct === null && !additive ? oneLevel(spec, sql, source, ctx, inputs) : twoLevel(spec, sql, source, ctx, inputs, distinct)
  return { text: dims.length === 0 ? text : `${text} LIMIT ${limit + 1}`, values: params.values }
}

/** `GROUP BY … ORDER BY …` over the given grouped expressions (nothing without groups). */
function grouping(raws: readonly string[]): string {
  if (raws.length === 0) return ''
  return ` GROUP BY ${raws.join(', ')} ORDER BY ${raws.map((r) => `${r} ASC NULLS LAST`).join(', ')}`
}

/** The plain form: every measure aggregated in one pass over the matching rows. */
function oneLevel(spec: AnalyticsSpec, dims: readonly DimensionSql[], source: string, ctx: AnalyticsContext, inputs: MeasureInputs): string {
  const measures = spec.measures.map((m, j) => `${aggregate(m, ctx.projection, inputs)} AS m${j}`)
  const groups = dims.map((d, i) => `${d.format(d.raw)} AS g${i}`)
  return `SELECT ${[...groups, ...measures].join(', ')} ${source}${grouping(dims.map((d) => d.raw))}`
}

function aggregate(measure: Measure, projection: Projection, inputs: MeasureInputs): string {
  switch (measure.type) {
    case 'count': return once('count(*)', inputs)
    case 'count_distinct': {
      const value = inputs.distinct.get(valueExpr(measure.field, projection))!
      return `count(DISTINCT ${value.counted(value.grouped)})`
    }
    // The sum of no values is 0, and so is their average: CONTRACT §7 makes every measure a JSON
    // number (docs/analytics.md says what a 0 average of a group without values means).
    case 'sum': return `COALESCE(${once(`sum(${numberExpr(measure.field, projection)})`, inputs)}, 0)`
    case 'average': return `COALESCE(${once(`avg(${numberExpr(measure.field, projection)})`, inputs)}, 0)`
    default: return assertNever(measure)
  }
}

/** A value count_distinct counts: the expression grouped, and how the groups read it (`""` is no value). */
interface Counted {
  readonly grouped: string
  counted(grouped: string): string
}

/** The values count_distinct measures count, and the joins that multi-select options need. */
interface MeasureInputs {
  /** Each counted field's value expression (see {@link valueExpr}) → what is counted. */
  readonly distinct: ReadonlyMap<string, Counted>
  readonly joins: readonly string[]
  /** With option joins, the condition of each asset's one row that the other measures count; else null. */
  readonly once: string | null
}

/**
 * A multi-select's options, one row each, from `x<k>`: `LEFT JOIN LATERAL unnest(col) WITH
 * ORDINALITY` (an asset with none keeps one row, v NULL). Other fields are counted as they read.
 */
function measureInputs(measures: readonly Measure[], projection: Projection): MeasureInputs {
  const distinct = new Map<string, Counted>()
  const joins: string[] = []
  const firsts: string[] = []
  for (const m of measures) {
    if (m.type !== 'count_distinct') continue
    const value = valueExpr(m.field, projection)
    if (distinct.has(value)) continue
    const options = optionsExpr(m.field, projection)
    if (options !== null) {
      const x = `x${joins.length}`
      joins.push(`LEFT JOIN LATERAL unnest(${options}) WITH ORDINALITY AS ${x}(v, o) ON TRUE`)
      firsts.push(`COALESCE(${x}.o, 1) = 1`)
      distinct.set(value, { grouped: `${x}.v`, counted: same })
    } else {
      const stored = storedText(m.field, projection)
      distinct.set(value, stored === null ? { grouped: value, counted: same } : { grouped: stored, counted: (g) => `NULLIF(${g}, '')` })
    }
  }
  return { distinct, joins, once: firsts.length === 0 ? null : firsts.join(' AND ') }
}

/** An aggregate over each asset's one row when option joins repeat it; as it is otherwise. */
function once(aggregate: string, inputs: MeasureInputs): string {
  return inputs.once === null ? aggregate : `${aggregate} FILTER (WHERE ${inputs.once})`
}

/**
 * Two levels: the rows grouped first, hashed, then those few groups grouped again.
 *
 * - When every count_distinct counts the same field (`distinct`): first one row per (groups,
 *   value), then the groups, counting those rows. PostgreSQL computes `count(DISTINCT x)` by
 *   sorting every row of each group, which measured twice as slow on 200,000 assets
 *   (docs/indexes-and-plans.md). A text value is grouped as stored and read as `NULLIF(x, '')`
 *   when counted, so no row evaluates it.
 * - Without count_distinct (every measure adds up), text group fields are grouped as stored
 *   first, and `""` joins the NULL group on the second level: `NULLIF` per group instead of per
 *   row, 10–20 % of the statement at 200,000 assets. (Not with `distinct`: a value held by a `""`
 *   and a NULL row would be counted twice once the two merge.)
 *
 * The other measures ride along as partial sums: count = Σ n, sum = Σ s, average = Σ s / Σ c.
 */
function twoLevel(spec: AnalyticsSpec, dims: readonly DimensionSql[], source: string, ctx: AnalyticsContext, inputs: MeasureInputs, distinct: Counted | null): string {
  const stored = (d: DimensionSql): string | null => (distinct === null ? d.stored : null)
  const dimKeys = dims.map((d) => stored(d) ?? d.raw)
  const innerGroup = distinct === null ? dimKeys : [...dimKeys, distinct.grouped]
  const inner = [...dimKeys.map((k, i) => `${k} AS d${i}`), ...(distinct === null ? [] : [`${distinct.grouped} AS x`])]
  const outer = spec.measures.map((m, j) => {
    switch (m.type) {
      case 'count': return `COALESCE(sum(s.n), 0) AS m${j}`
      case 'count_distinct': return `count(${distinct!.counted('s.x')}) AS m${j}`
      case 'sum': return `COALESCE(sum(s.s${j}), 0) AS m${j}`
      case 'average': return `COALESCE(sum(s.s${j}) / NULLIF(sum(s.c${j}), 0), 0) AS m${j}`
      default: return assertNever(m)
    }
  })
  if (spec.measures.some((m) => m.type === 'count')) inner.push(`${once('count(*)', inputs)} AS n`)
  spec.measures.forEach((m, j) => {
    if (m.type === 'sum' || m.type === 'average') inner.push(`${once(`sum(${numberExpr(m.field, ctx.projection)})`, inputs)} AS s${j}`)
    if (m.type === 'average') inner.push(`${once(`count(${numberExpr(m.field, ctx.projection)})`, inputs)} AS c${j}`)
  })
  const keys = dims.map((d, i) => (stored(d) === null ? `s.d${i}` : `NULLIF(s.d${i}, '')`))
  const groups = dims.map((d, i) => `${d.format(keys[i]!)} AS g${i}`)
  return `SELECT ${[...groups, ...outer].join(', ')} FROM (SELECT ${inner.join(', ')} ${source} GROUP BY ${innerGroup.join(', ')}) s${grouping(keys)}`
}

/**
 * A field's value on row `a`, NULL when empty: `""` is stored as is, so text reads through
 * `NULLIF(…, '')`. A multi-select is its array (`[]` included: callers unnest it); a key with
 * several kinds reads as text.
 */
function valueExpr(field: AnalyticsField, projection: Projection, alias = 'a'): string {
  if (field.kind === 'column') return `${alias}.${ident(field.column)}`
  if (field.kinds.length === 1) {
    const c = columnRef(projection, alias, field.kinds[0]!, field.key)
    return field.kinds[0] === 'text' ? `NULLIF(${c}, '')` : c
  }
  return `COALESCE(${field.kinds.map((kind) => asText(kind, columnRef(projection, alias, kind, field.key))).join(', ')})`
}

/** A key's column of one kind read as text, NULL when empty (a key with several kinds is grouped as text). */
function asText(kind: ValueKind, column: string): string {
  return kind === 'text' ? `NULLIF(${column}, '')` : kind === 'multi' ? `NULLIF(array_to_string(${column}, ','), '')` : `${column}::text`
}

/**
 * The values of a field that is a multi-select for some asset types, as an array to unnest (one
 * group, one counted value per option: CONTRACT §7), or null for any other field. Where other
 * types define the key with another kind (a select `kind` on racks, a multi-select on cables),
 * their value is a one-item array of its text: an asset holds one of the two.
 */
function optionsExpr(field: AnalyticsField, projection: Projection, alias = 'a'): string | null {
  if (field.kind !== 'property' || !field.kinds.includes('multi')) return null
  const multi = columnRef(projection, alias, 'multi', field.key)
  if (field.kinds.length === 1) return multi
  const others = field.kinds.filter((kind) => kind !== 'multi').map((kind) => asText(kind, columnRef(projection, alias, kind, field.key)))
  return `COALESCE(${multi}, ARRAY[COALESCE(${others.join(', ')})])`
}

/** A text property's column as stored (`""` included), or null for any other field. */
function storedText(field: AnalyticsField, projection: Projection): string | null {
  return field.kind === 'property' && field.kinds.length === 1 && field.kinds[0] === 'text' ? columnRef(projection, 'a', 'text', field.key) : null
}

function numberExpr(field: AnalyticsField, projection: Projection): string {
  if (field.kind !== 'property') throw new Error('sum and average take a number or integer property')
  return columnRef(projection, 'a', 'number', field.key)
}

const TIMESTAMP_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS"Z"'`
const DATE_FORMAT = `'YYYY-MM-DD'`
const same = (raw: string): string => raw

function dimensionSql(d: Dimension, i: number, ctx: AnalyticsContext, params: Params): DimensionSql {
  if (d.kind === 'related') return relatedSql(d, i, ctx, params)
  const { field, interval } = d
  if (field.kind === 'column') {
    const column = valueExpr(field, ctx.projection)
    if (!field.timestamp || interval === null) return { raw: column, stored: null, join: null, format: same }
    // Buckets in UTC (CONTRACT §1), shown as the bucket's first second; weeks start on Monday.
    const raw = `date_trunc(${literal(interval)}, ${column} AT TIME ZONE 'UTC')`
    return { raw, stored: null, join: null, format: (r) => `to_char(${r}, ${TIMESTAMP_FORMAT})` }
  }
  const options = optionsExpr(field, ctx.projection)
  if (options !== null) {
    // One group per option the asset holds; none ([] or missing) → the LEFT JOIN's NULL group.
    return { raw: `j${i}.v`, stored: null, join: `LEFT JOIN LATERAL (SELECT DISTINCT u.v FROM unnest(${options}) AS u(v)) j${i} ON TRUE`, format: same }
  }
  if (field.kinds.length === 1 && field.kinds[0] === 'date') {
    const column = valueExpr(field, ctx.projection)
    const raw = interval === null ? column : `date_trunc(${literal(interval)}, ${column}::timestamp)::date`
    return { raw, stored: null, join: null, format: (r) => `to_char(${r}::timestamp, ${DATE_FORMAT})` }
  }
  return { raw: valueExpr(field, ctx.projection), stored: storedText(field, ctx.projection), join: null, format: same }
}

/**
 * One group per distinct type of the assets related to each asset through `relationship_type_key`
 * in `direction` (outgoing: the asset is the source), counting only related assets that are live
 * (in the projection) and visible to the key; an asset with none falls in the NULL group. A hash
 * join over the organization's relationships of that type, not a lookup per asset.
 */
function relatedSql(d: Dimension & { kind: 'related' }, i: number, ctx: AnalyticsContext, params: Params): DimensionSql {
  const [own, other] = d.direction === 'outgoing' ? ['source_asset_id', 'target_asset_id'] : ['target_asset_id', 'source_asset_id']
  const ra = `ra${i}`
  const scope = scopeCondition(ctx.auth, ra, 'view', params)
  const conditions = [`r.org_id = ${params.add(ctx.orgId)}`]
  if (d.relationshipTypeKey !== null) conditions.push(`r.relationship_type_key = ${params.add(d.relationshipTypeKey)}`)
  const join = `LEFT JOIN (SELECT DISTINCT r.${own} AS asset_id, ${ra}.asset_type_key AS v FROM relationships r`
    + ` JOIN ${ident(ctx.projection.table)} ${ra} ON ${ra}.org_id = r.org_id AND ${ra}.id = r.${other} AND ${scope}`
    + ` WHERE ${conditions.join(' AND ')}) j${i} ON j${i}.asset_id = a.id`
  return { raw: `j${i}.v`, stored: null, join, format: same }
}

function outputType(d: Dimension): OutputType {
  if (d.kind === 'related' || d.field.kind === 'column' || d.field.kinds.length > 1) return 'text'
  const kind = d.field.kinds[0]!
  return kind === 'number' ? 'number' : kind === 'boolean' ? 'boolean' : 'text'
}
