import type { AggregateRows, RequestContext } from '../request/context.js'
import { AppError, Errors } from '../core/errors.js'
import { ensureProjection } from '../projection/sync.js'
import { compileAnalytics, MAX_BREAKDOWN_ROWS, MAX_GROUPS, type CompiledAnalytics, type OutputType, type Statement } from './compile.js'
import { parseAnalytics, type AnalyticsSpec } from './spec.js'

export type GroupValue = string | number | boolean | null

type Row = Readonly<Record<string, unknown>>

export interface AnalyticsRow {
  group: Record<string, GroupValue>
  measures: Record<string, number | null>
  breakdown?: { value: GroupValue; measures: Record<string, number | null> }[]
}

/**
 * POST /analytics/assets (CONTRACT §7): parse and check the body, compile, run one aggregate
 * statement (two with breakdown_by, side by side), and shape the rows. The rows are groups, never
 * assets: at most MAX_GROUPS of them.
 */
export async function runAnalytics(ctx: RequestContext, body: unknown): Promise<{ data: AnalyticsRow[]; meta: { total_groups: number } }> {
  const spec = parseAnalytics(body, ctx.metamodel)
  const projection = await ensureProjection(ctx.db, ctx.metamodel)
  const compiled = compileAnalytics(spec, { orgId: ctx.auth.orgId, auth: ctx.auth, projection })
  const { groups, breakdown } = await aggregate(ctx, compiled)
  if (groups.length > MAX_GROUPS || (breakdown?.length ?? 0) > MAX_BREAKDOWN_ROWS) {
    throw new AppError(Errors.INVALID_REQUEST, [{
      detail: `the answer would have more than ${groups.length > MAX_GROUPS ? `${MAX_GROUPS} groups` : `${MAX_BREAKDOWN_ROWS} breakdown entries`}; narrow the filter or group by fewer fields`,
      pointer: groups.length > MAX_GROUPS ? '/group_by' : '/breakdown_by',
    }])
  }
  const data = groups.map((row) => ({ group: groupOf(row, spec, compiled.groupTypes), measures: measuresOf(row, spec) }))
  if (breakdown !== null) attachBreakdown(data, groups, breakdown, spec, compiled)
  return { data, meta: { total_groups: data.length } }
}

/**
 * The statements' rows, or the answer remembered for the same statements since the
 * organization's data last changed (counts/cache.ts; the statements carry the filter and the
 * key's scope). A dashboard asking again costs no scan.
 */
async function aggregate(ctx: RequestContext, compiled: CompiledAnalytics): Promise<AggregateRows> {
  const key = JSON.stringify([compiled.groups, compiled.breakdown])
  const remembered = await ctx.analytics?.read(key)
  if (remembered !== undefined) return remembered
  const run = async (s: Statement): Promise<Row[]> => (await ctx.db.query<Row>(s.text, s.values)).rows
  const [groups, breakdown] = await Promise.all([run(compiled.groups), compiled.breakdown === null ? null : run(compiled.breakdown)])
  ctx.analytics?.write(key, { groups, breakdown }, groups.length + (breakdown?.length ?? 0))
  return { groups, breakdown }
}

function groupOf(row: Row, spec: AnalyticsSpec, types: readonly OutputType[]): Record<string, GroupValue> {
  return Object.fromEntries(spec.groupBy.map((d, i) => [d.name, toValue(row[`g${i}`], types[i]!)]))
}

function measuresOf(row: Row, spec: AnalyticsSpec): Record<string, number | null> {
  return Object.fromEntries(spec.measures.map((m, j) => {
    const value = toNumber(row[`m${j}`])
    // A sum past ±1.8e308 is ±Infinity, which JSON cannot carry (it would be written as null,
    // indistinguishable from "no value"): a clear error instead. (An average, exact in SQL, lies
    // between its values: it always fits.)
    if (value !== null && !Number.isFinite(value)) {
      throw new AppError(Errors.VALIDATION_FAILED, [{
        detail: `the ${m.type} ${JSON.stringify(m.name)} is out of range: it does not fit a 64-bit float (beyond ±1.8e308); narrow the filter or group by more fields`,
        pointer: `/measures/${j}`,
      }])
    }
    return [m.name, value]
  }))
}

/**
 * Each breakdown row belongs to the group with the same group values (its key); within a group the
 * entries keep the statement's order (by value). Every group gets a `breakdown` list.
 */
function attachBreakdown(data: AnalyticsRow[], groups: readonly Row[], rows: readonly Row[], spec: AnalyticsSpec, compiled: CompiledAnalytics): void {
  const keyOf = (row: Row): string => JSON.stringify(spec.groupBy.map((_, i) => toValue(row[`g${i}`], compiled.groupTypes[i]!)))
  const byKey = new Map<string, NonNullable<AnalyticsRow['breakdown']>>()
  groups.forEach((row, i) => {
    const list: NonNullable<AnalyticsRow['breakdown']> = []
    data[i]!.breakdown = list
    byKey.set(keyOf(row), list)
  })
  const at = spec.groupBy.length
  for (const row of rows) {
    byKey.get(keyOf(row))?.push({ value: toValue(row[`g${at}`], compiled.breakdownType!), measures: measuresOf(row, spec) })
  }
}

/** numeric and bigint arrive as strings or bigints on some drivers; the API answers JSON numbers. */
function toNumber(value: unknown): number | null {
  if (value === null || value === undefined) return null
  return typeof value === 'number' ? value : Number(value)
}

function toValue(value: unknown, type: OutputType): GroupValue {
  if (value === null || value === undefined) return null
  if (type === 'number') return toNumber(value)
  if (type === 'boolean') return value === true || value === 't' || value === 'true'
  return String(value)
}
