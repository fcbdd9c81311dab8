import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { ACME } from '../helpers/fixtures.js'

/**
 * The read side against a model of its rules written in plain JavaScript (CONTRACT §3, §4, §7, §9;
 * docs/search.md, docs/analytics.md): random filter trees (nested `and` / `or` of every operator
 * on every kind of field), sorts, pages and aggregations over a fixed set of assets and
 * relationships whose values collide on purpose (empties of every kind, case variants, equal
 * names, keys that some asset types do not define, archived ends), asked with an Admin key and
 * with keys of narrower roles (one of them seeing only assets without an access domain). Each
 * answer — POST /search/assets (with each asset's included relationships filtered, sorted and
 * paged) and /search/relationships, GET /assets with its links and included relationships, POST
 * /analytics/assets — is compared with what the model selects, orders, cuts and counts. The
 * records come back through the API, so the model reads the values as stored. A failure prints
 * fast-check's seed and the smallest request it found. KBIS_QUERY_MODEL_RUNS sets the number of
 * requests per test and store (50 by default; `npm run models`: 2,000).
 */
const RUNS = Number(process.env.KBIS_QUERY_MODEL_RUNS ?? 50)

type Value = string | number | boolean | string[] | null | undefined
interface Asset {
  id: string
  name: string
  asset_type_key: string
  access_domain_key: string | null
  created_at: string
  properties: Record<string, Value>
}
interface Relationship {
  id: string
  relationship_type_key: string
  source_asset_id: string
  target_asset_id: string
  created_at: string
}
interface Condition { field: string; operator: string; value?: unknown }
type Node = Condition | { and: Node[] } | { or: Node[] }
interface Sort { field: string; order: 'asc' | 'desc' }

/** A small deterministic generator (mulberry32), so that every run searches the same assets. */
function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Each domain holds the values the assets take and the filters ask for, so that they meet often.
const NAMES = ['alpha', 'Alpha', 'ALPHA-2', 'beta', 'db-01', 'db-02', 'web-1', 'Web-2', 'école', 'École', 'x_y', 'x%y', 'a\\b', 'zeta']
const OWNERS = ['', 'ann', 'Ann', 'ANNA', 'bob', 'Bob Smith', 'éve', 'Éve', '100%', 'a_b']
const ENVIRONMENTS = ['dev', 'staging', 'prod']
const CPUS = [1, 2, 4, 8, 16]
const MEMORIES = [0.5, 1, 1.5, 2, 15.5, 16, 64]
const DATES = ['2023-12-31', '2024-01-01', '2024-02-29', '2025-06-30']
const TAGS = ['pci', 'gdpr', 'legacy']
const TIERS = ['gold', 'silver', 'bronze']
const DOMAINS = ['it', 'finance', null]

/** Missing, null or one of `values`. */
function pick<T>(next: () => number, values: readonly T[], emptyShare = 0.25): T | null | undefined {
  const r = next()
  if (r < emptyShare / 2) return undefined
  if (r < emptyShare) return null
  return values[Math.floor(next() * values.length)]!
}

function withoutMissing(properties: Record<string, Value>): Record<string, Value> {
  return Object.fromEntries(Object.entries(properties).filter(([, v]) => v !== undefined))
}

/** The bodies of the assets to create, by asset type. */
function seedBodies(): { type: string; items: object[] }[] {
  const next = random(20261202)
  const name = () => NAMES[Math.floor(next() * NAMES.length)]!
  const servers = Array.from({ length: 64 }, (_, i) => {
    const tags = next() < 0.2 ? (next() < 0.5 ? undefined : []) : TAGS.filter(() => next() < 0.45)
    return {
      name: name(),
      access_domain_key: pick(next, DOMAINS, 0) ?? null,
      properties: withoutMissing({
        hostname: `srv-${i}`,
        environment: pick(next, ENVIRONMENTS),
        cpu_count: pick(next, CPUS),
        memory_gb: pick(next, MEMORIES),
        purchased_on: pick(next, DATES),
        tags: tags && next() < 0.3 ? [...tags].reverse() : tags,
        managed: pick(next, [true, false]),
        owner: pick(next, OWNERS),
      }),
    }
  })
  const applications = Array.from({ length: 16 }, (_, i) => ({
    name: name(),
    access_domain_key: pick(next, DOMAINS, 0) ?? null,
    properties: withoutMissing({ code: `app-${i}`, tier: pick(next, TIERS), owner: pick(next, OWNERS) }),
  }))
  const notes = Array.from({ length: 10 }, () => ({ name: name(), properties: withoutMissing({ body: pick(next, OWNERS) }) }))
  return [{ type: 'server', items: servers }, { type: 'application', items: applications }, { type: 'note', items: notes }]
}

/** 80 relationships: `runs_on` from applications to servers, `depends_on` between any two assets. */
function seedRelationships(assets: readonly Asset[]): Omit<Relationship, 'id' | 'created_at'>[] {
  const next = random(1202)
  const of = (type: string | null) => assets.filter((a) => type === null || a.asset_type_key === type)
  const pairs = new Set<string>()
  const items: Omit<Relationship, 'id' | 'created_at'>[] = []
  while (items.length < 80) {
    const type = next() < 0.5 ? 'runs_on' : 'depends_on'
    const [sources, targets] = type === 'runs_on' ? [of('application'), of('server')] : [of(null), of(null)]
    const source = sources[Math.floor(next() * sources.length)]!.id
    const target = targets[Math.floor(next() * targets.length)]!.id
    if (source === target || pairs.has(`${type} ${source} ${target}`)) continue
    pairs.add(`${type} ${source} ${target}`)
    items.push({ relationship_type_key: type, source_asset_id: source, target_asset_id: target })
  }
  return items
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

const isEmpty = (v: Value): boolean => v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)
const lower = (v: string): string => v.toLowerCase()

/** A field of an asset (`properties.<key>` included) or of a relationship. */
function read(record: object, field: string): Value {
  if (field.startsWith('properties.')) return (record as Asset).properties[field.slice('properties.'.length)]
  return (record as unknown as Record<string, Value>)[field]
}

function compare(a: string | number, b: string | number): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b
  return Buffer.compare(Buffer.from(String(a)), Buffer.from(String(b)))
}

/** Whether a value meets one condition. */
function holds(v: Value, node: Condition): boolean {
  const value = node.value as never
  const empty = isEmpty(v)
  switch (node.operator) {
    case 'equals': return !empty && v === value
    case 'not_equals': return empty || v !== value
    case 'greater_than': return !empty && compare(v as string, value) > 0
    case 'greater_than_or_equals': return !empty && compare(v as string, value) >= 0
    case 'less_than': return !empty && compare(v as string, value) < 0
    case 'less_than_or_equals': return !empty && compare(v as string, value) <= 0
    case 'contains': return !empty && lower(v as string).includes(lower(value))
    case 'not_contains': return empty || !lower(v as string).includes(lower(value))
    case 'starts_with': return !empty && lower(v as string).startsWith(lower(value))
    case 'includes': return Array.isArray(v) && v.includes(value)
    case 'not_includes': return !Array.isArray(v) || !v.includes(value)
    case 'in': return !empty && (value as Value[]).includes(v)
    case 'not_in': return empty || !(value as Value[]).includes(v)
    case 'is_empty': return empty
    case 'is_not_empty': return !empty
    default: throw new Error(`model: no operator ${node.operator}`)
  }
}

/** A filter tree, its conditions decided by `leaf`: an empty `and` holds, an empty `or` does not. */
function tree(node: Node, leaf: (condition: Condition) => boolean): boolean {
  if ('and' in node) return node.and.every((n) => tree(n, leaf))
  if ('or' in node) return node.or.some((n) => tree(n, leaf))
  return leaf(node)
}

const matches = (asset: Asset, node: Node): boolean => tree(node, (condition) => holds(read(asset, condition.field), condition))

/** A relationship's own fields, and those of its ends under `source_asset.` and `target_asset.`. */
function relationshipMatches(relationship: Relationship, node: Node, assets: ReadonlyMap<string, Asset>): boolean {
  return tree(node, (condition) => {
    const end = /^(source|target)_asset\.(.+)$/.exec(condition.field)
    if (end === null) return holds(read(relationship, condition.field), condition)
    const asset = assets.get(end[1] === 'source' ? relationship.source_asset_id : relationship.target_asset_id)!
    return holds(read(asset, end[2]!), { ...condition, field: end[2]! })
  })
}

/** Sorting as docs/search.md says: empties last ascending and first descending, ties by id. */
function order<T extends { id: string }>(items: readonly T[], sort: readonly Sort[], valueOf: (item: T, field: string) => Value): T[] {
  const cmpValues = (a: Value, b: Value): number => {
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.min(a.length, b.length); i++) {
        const c = compare(a[i]!, b[i]!)
        if (c !== 0) return c
      }
      return a.length - b.length
    }
    if (typeof a === 'boolean') return Number(a) - Number(b)
    return compare(a as string, b as string)
  }
  return [...items].sort((x, y) => {
    for (const { field, order: dir } of sort) {
      const [a, b] = [valueOf(x, field), valueOf(y, field)]
      const [ea, eb] = [isEmpty(a), isEmpty(b)]
      let c: number
      if (ea && eb) c = 0
      else if (ea || eb) c = ea ? 1 : -1
      else c = cmpValues(a, b)
      if (dir === 'desc') c = -c
      if (c !== 0) return c
    }
    return compare(x.id, y.id)
  })
}

// ---------------------------------------------------------------------------------------------
// The filters
// ---------------------------------------------------------------------------------------------

const c = (field: string, operator: string, value?: unknown): Condition => (value === undefined ? { field, operator } : { field, operator, value })
const text = (values: readonly string[]) => fc.constantFrom(...values)
const substring = (values: readonly string[]) =>
  fc.constantFrom(...values).chain((v) => fc.tuple(fc.nat(v.length), fc.nat(v.length)).map(([a, b]) => v.slice(Math.min(a, b), Math.max(a, b)))).filter((s) => s !== '')
const emptiness = (field: string) => fc.constantFrom(c(field, 'is_empty'), c(field, 'is_not_empty'))

/**
 * Conditions on a text field taking `values`; the values asked for also hold one no asset holds
 * and `""`, which is no value to match (docs/search.md).
 */
function textConditions(field: string, values: readonly string[]): fc.Arbitrary<Condition> {
  const asked = [...values, 'nobody', '']
  return fc.oneof(
    fc.tuple(fc.constantFrom('equals', 'not_equals'), text(asked)).map(([op, v]) => c(field, op, v)),
    fc.tuple(fc.constantFrom('contains', 'not_contains', 'starts_with'), fc.oneof(substring(values), fc.constantFrom('A', 'É', '%', '_', '\\', 'zz'))).map(([op, v]) => c(field, op, v)),
    fc.tuple(fc.constantFrom('in', 'not_in'), fc.uniqueArray(text(asked), { maxLength: 3 })).map(([op, v]) => c(field, op, v)),
    emptiness(field),
  )
}

function orderedConditions<T extends string | number>(field: string, values: readonly T[]): fc.Arbitrary<Condition> {
  return fc.oneof(
    fc.tuple(fc.constantFrom('equals', 'not_equals', 'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals'), fc.constantFrom(...values)).map(([op, v]) => c(field, op, v)),
    fc.tuple(fc.constantFrom('in', 'not_in'), fc.uniqueArray(fc.constantFrom(...values), { maxLength: 3 })).map(([op, v]) => c(field, op, v)),
    emptiness(field),
  )
}

const condition: fc.Arbitrary<Condition> = fc.oneof(
  textConditions('name', NAMES),
  fc.tuple(fc.constantFrom('equals', 'not_equals'), text(['server', 'application', 'note'])).map(([op, v]) => c('asset_type_key', op, v)),
  fc.tuple(fc.constantFrom('in', 'not_in'), fc.uniqueArray(text(['server', 'application', 'note']), { maxLength: 2 })).map(([op, v]) => c('asset_type_key', op, v)),
  fc.oneof(
    fc.tuple(fc.constantFrom('equals', 'not_equals'), text(['it', 'finance'])).map(([op, v]) => c('access_domain_key', op, v)),
    emptiness('access_domain_key'),
  ),
  textConditions('properties.owner', OWNERS.filter((o) => o !== '')),
  textConditions('properties.environment', ENVIRONMENTS),
  textConditions('properties.tier', TIERS),
  orderedConditions('properties.cpu_count', [0, ...CPUS, 3]),
  orderedConditions('properties.memory_gb', [...MEMORIES, 1.25, 100]),
  orderedConditions('properties.purchased_on', [...DATES, '2024-06-15']),
  fc.oneof(
    fc.tuple(fc.constantFrom('includes', 'not_includes'), text(TAGS)).map(([op, v]) => c('properties.tags', op, v)),
    emptiness('properties.tags'),
  ),
  fc.oneof(
    fc.tuple(fc.constantFrom('equals', 'not_equals'), fc.boolean()).map(([op, v]) => c('properties.managed', op, v)),
    emptiness('properties.managed'),
  ),
)

/** Filter trees of `conditions`: nested `and` / `or` groups of up to `width` members (empty ones included). */
function treesOf(conditions: fc.Arbitrary<Condition>, width = 4): fc.Arbitrary<Node> {
  return fc.letrec<{ node: Node }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      conditions,
      fc.array(tie('node'), { maxLength: width }).map((and) => ({ and })),
      fc.array(tie('node'), { maxLength: width }).map((or) => ({ or })),
    ),
  })).node
}

const filter = treesOf(condition)

const SORT_FIELDS = ['name', 'created_at', 'asset_type_key', 'properties.owner', 'properties.environment', 'properties.cpu_count', 'properties.memory_gb',
  'properties.purchased_on', 'properties.managed', 'properties.tags']
/** Sorts of one or two of `fields` (none at all when `minLength` is 0), each ascending or descending. */
const sortsOf = (fields: readonly string[], minLength = 1): fc.Arbitrary<Sort[]> =>
  fc.uniqueArray(fc.record({ field: fc.constantFrom(...fields), order: fc.constantFrom<'asc' | 'desc'>('asc', 'desc') }), { minLength, maxLength: 2, selector: (s) => s.field })
const sort = sortsOf(SORT_FIELDS)

// ---------------------------------------------------------------------------------------------
// Analytics (CONTRACT §7, docs/analytics.md)
// ---------------------------------------------------------------------------------------------

type Interval = 'day' | 'week' | 'month' | 'quarter' | 'year'
type Grouping = string
  | { field: 'related_asset_type_key'; relationship_type_key?: string; direction?: 'outgoing' | 'incoming'; as: string }
  | { field: 'properties.purchased_on'; interval: Interval; as: string }
interface Measure { type: 'count' | 'count_distinct' | 'sum' | 'average'; field?: string }
type GroupValue = string | number | boolean | null

const GROUPINGS: Grouping[] = ['asset_type_key', 'access_domain_key', 'properties.environment', 'properties.tags', 'properties.owner', 'properties.managed',
  'properties.cpu_count', 'properties.purchased_on', 'properties.tier',
  { field: 'related_asset_type_key', as: 'related' }, { field: 'related_asset_type_key', relationship_type_key: 'runs_on', direction: 'incoming', as: 'run_by' },
  ...(['day', 'week', 'month', 'quarter', 'year'] as const).map((interval) => ({ field: 'properties.purchased_on' as const, interval, as: `purchased_${interval}` }))]

/** A date's interval, named by its first day (UTC; weeks start on Monday). */
function intervalOf(date: string, interval: Interval): string {
  const [y, mo, d] = date.split('-').map(Number) as [number, number, number]
  const day = (t: number) => new Date(t).toISOString().slice(0, 10)
  switch (interval) {
    case 'day': return date
    case 'week': return day(Date.UTC(y, mo - 1, d) - ((new Date(Date.UTC(y, mo - 1, d)).getUTCDay() + 6) % 7) * 86_400_000)
    case 'month': return day(Date.UTC(y, mo - 1, 1))
    case 'quarter': return day(Date.UTC(y, mo - 1 - ((mo - 1) % 3), 1))
    case 'year': return day(Date.UTC(y, 0, 1))
  }
}
const MEASURES: Measure[] = [
  { type: 'count_distinct', field: 'properties.owner' }, { type: 'count_distinct', field: 'properties.tags' }, { type: 'count_distinct', field: 'properties.environment' },
  { type: 'count_distinct', field: 'properties.cpu_count' }, { type: 'count_distinct', field: 'name' }, { type: 'count_distinct', field: 'access_domain_key' },
  { type: 'sum', field: 'properties.cpu_count' }, { type: 'sum', field: 'properties.memory_gb' }, { type: 'average', field: 'properties.memory_gb' },
  { type: 'average', field: 'properties.cpu_count' },
]
const groupName = (g: Grouping): string => (typeof g === 'string' ? g : g.as)
const measureName = (m: Measure): string => (m.type === 'count' ? 'count' : `${m.type}:${m.field}`)

/** The values an asset is grouped under: one per option of a multi-select or related type, `[null]` when it has none. */
function groupValues(asset: Asset, grouping: Grouping, links: readonly Relationship[], assets: ReadonlyMap<string, Asset>): GroupValue[] {
  if (typeof grouping !== 'string' && 'interval' in grouping) {
    const v = read(asset, grouping.field)
    return isEmpty(v) ? [null] : [intervalOf(v as string, grouping.interval)]
  }
  if (typeof grouping !== 'string') {
    const outgoing = grouping.direction !== 'incoming'
    const types = new Set(links
      .filter((r) => (grouping.relationship_type_key === undefined || r.relationship_type_key === grouping.relationship_type_key) && (outgoing ? r.source_asset_id : r.target_asset_id) === asset.id)
      .map((r) => assets.get(outgoing ? r.target_asset_id : r.source_asset_id)!.asset_type_key))
    return types.size === 0 ? [null] : [...types]
  }
  const v = read(asset, grouping)
  if (isEmpty(v)) return [null]
  return Array.isArray(v) ? [...new Set(v)] : [v as GroupValue]
}

function measure(m: Measure, members: readonly Asset[]): number {
  if (m.type === 'count') return members.length
  const values = members.map((a) => read(a, m.field!)).filter((v) => !isEmpty(v))
  if (m.type === 'count_distinct') return new Set(values.flatMap((v) => (Array.isArray(v) ? v : [v]))).size
  const sum = (values as number[]).reduce((a, b) => a + b, 0)
  return m.type === 'sum' ? sum : values.length === 0 ? 0 : sum / values.length
}

/** Ascending, `null` last: text in byte order, numbers numerically, `false` before `true`. */
function compareGroupValues(a: GroupValue, b: GroupValue): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1
  if (typeof a === 'boolean') return Number(a) - Number(b)
  return compare(a as string, b as string)
}

const rounded = (n: number): number => Number(n.toPrecision(12))

/** The answer the model gives: its groups in order, their measures and breakdowns, numbers rounded to 12 digits. */
function analytics(members: readonly Asset[], groupBy: readonly Grouping[], measures: readonly Measure[], breakdownBy: Grouping | undefined,
  links: readonly Relationship[], assets: ReadonlyMap<string, Asset>): unknown[] {
  const measured = (of: readonly Asset[]) => Object.fromEntries(measures.map((m) => [measureName(m), rounded(measure(m, of))]))
  const groups = new Map<string, { values: GroupValue[]; members: Asset[] }>()
  for (const asset of members) {
    let combos: GroupValue[][] = [[]]
    for (const g of groupBy) combos = combos.flatMap((combo) => groupValues(asset, g, links, assets).map((v) => [...combo, v]))
    for (const values of combos) {
      const key = JSON.stringify(values)
      if (!groups.has(key)) groups.set(key, { values, members: [] })
      groups.get(key)!.members.push(asset)
    }
  }
  if (groupBy.length === 0 && groups.size === 0) groups.set('[]', { values: [], members: [] })
  const sorted = [...groups.values()].sort((x, y) => {
    for (let i = 0; i < x.values.length; i++) {
      const c = compareGroupValues(x.values[i]!, y.values[i]!)
      if (c !== 0) return c
    }
    return 0
  })
  return sorted.map(({ values, members: inGroup }) => {
    const row: Record<string, unknown> = { group: Object.fromEntries(groupBy.map((g, i) => [groupName(g), values[i]])), measures: measured(inGroup) }
    if (breakdownBy !== undefined) {
      const entries = new Map<string, { value: GroupValue; members: Asset[] }>()
      for (const asset of inGroup) {
        for (const value of groupValues(asset, breakdownBy, links, assets)) {
          const key = JSON.stringify(value)
          if (!entries.has(key)) entries.set(key, { value, members: [] })
          entries.get(key)!.members.push(asset)
        }
      }
      row.breakdown = [...entries.values()].sort((x, y) => compareGroupValues(x.value, y.value)).map((e) => ({ value: e.value, measures: measured(e.members) }))
    }
    return row
  })
}

/** The same answer with its numbers rounded as the model's are. */
function roundedAnswer(data: unknown): unknown {
  return JSON.parse(JSON.stringify(data), (_, v: unknown) => (typeof v === 'number' ? rounded(v) : v))
}

const analyticsBody = fc.record({
  group_by: fc.uniqueArray(fc.constantFrom(...GROUPINGS), { maxLength: 2, selector: groupName }),
  measures: fc.uniqueArray(fc.constantFrom(...MEASURES), { maxLength: 4, selector: measureName }).map((ms) => [{ type: 'count' } as Measure, ...ms]),
  breakdown_by: fc.option(fc.constantFrom(...GROUPINGS), { nil: undefined }),
})

/** Conditions of a relationship search: its own fields, and any asset condition on either end. */
function relationshipFilter(assetIds: readonly string[]): fc.Arbitrary<Node> {
  const types = ['runs_on', 'depends_on', 'nothing']
  const ids = fc.constantFrom(...assetIds)
  const own: fc.Arbitrary<Condition> = fc.oneof(
    fc.tuple(fc.constantFrom('equals', 'not_equals'), text(types)).map(([op, v]) => c('relationship_type_key', op, v)),
    fc.tuple(fc.constantFrom('in', 'not_in'), fc.uniqueArray(text(types), { maxLength: 2 })).map(([op, v]) => c('relationship_type_key', op, v)),
    fc.tuple(fc.constantFrom('source_asset_id', 'target_asset_id'), fc.constantFrom('equals', 'not_equals'), ids).map(([field, op, v]) => c(field, op, v)),
    fc.tuple(fc.constantFrom('source_asset_id', 'target_asset_id'), fc.constantFrom('in', 'not_in'), fc.uniqueArray(ids, { maxLength: 4 })).map(([field, op, v]) => c(field, op, v)),
  )
  const onEnd = fc.tuple(fc.constantFrom('source_asset.', 'target_asset.'), condition).map(([prefix, cond]) => ({ ...cond, field: `${prefix}${cond.field}` }))
  return treesOf(fc.oneof(own, onEnd))
}

const relationshipSort = sortsOf(['created_at', 'relationship_type_key', 'source_asset_id', 'target_asset_id'])

// ---------------------------------------------------------------------------------------------
// Included relationships (CONTRACT §3, §4; docs/relationships.md)
// ---------------------------------------------------------------------------------------------

interface Entry { id: string; relationship_type_key: string; direction: 'outgoing' | 'incoming'; related: Asset; created_at: string }

/** Each relationship of `asset` the key sees, as an entry seen from it (no relationship in these assets joins an asset to itself). */
function entriesOf(asset: Asset, links: readonly Relationship[], assets: ReadonlyMap<string, Asset>): Entry[] {
  return links.flatMap((r): Entry[] => {
    if (r.source_asset_id === asset.id) return [{ id: r.id, relationship_type_key: r.relationship_type_key, direction: 'outgoing', related: assets.get(r.target_asset_id)!, created_at: r.created_at }]
    if (r.target_asset_id === asset.id) return [{ id: r.id, relationship_type_key: r.relationship_type_key, direction: 'incoming', related: assets.get(r.source_asset_id)!, created_at: r.created_at }]
    return []
  })
}

const readEntry = (entry: object, field: string): Value => {
  const e = entry as Entry
  if (field === 'related_asset.name') return e.related.name
  if (field === 'related_asset.asset_type_key') return e.related.asset_type_key
  return read(e, field)
}

const includeCondition: fc.Arbitrary<Condition> = fc.oneof(
  fc.tuple(fc.constantFrom('equals', 'not_equals'), text(['runs_on', 'depends_on'])).map(([op, v]) => c('relationship_type_key', op, v)),
  fc.tuple(fc.constantFrom('equals', 'not_equals'), text(['outgoing', 'incoming'])).map(([op, v]) => c('direction', op, v)),
  fc.tuple(fc.constantFrom('in', 'not_in'), fc.uniqueArray(text(['server', 'application', 'note']), { minLength: 1, maxLength: 2 })).map(([op, v]) => c('related_asset.asset_type_key', op, v)),
  fc.tuple(fc.constantFrom('equals', 'not_equals', 'contains', 'not_contains', 'starts_with'), substring(NAMES)).map(([op, v]) => c('related_asset.name', op, v)),
)
const includeFilter = treesOf(includeCondition, 3)
const includeSort = sortsOf(['created_at', 'relationship_type_key', 'related_asset.name'], 0)

/**
 * A GET list's `filter[<field>]=<value>` (CONTRACT §3): equality read by the field's type, a
 * multi-select including the value, `filter[access_domain_key]=` (empty) for no access domain.
 */
const listFilter: fc.Arbitrary<[string, string, Condition]> = fc.oneof(
  text([...NAMES, 'nobody', '']).map((v) => ['name', v, c('name', 'equals', v)] as [string, string, Condition]),
  text(['server', 'application', 'note']).map((v) => ['asset_type_key', v, c('asset_type_key', 'equals', v)] as [string, string, Condition]),
  text(['it', 'finance', '']).map((v) => ['access_domain_key', v, v === '' ? c('access_domain_key', 'is_empty') : c('access_domain_key', 'equals', v)] as [string, string, Condition]),
  text([...OWNERS, 'nobody']).map((v) => ['properties.owner', v, c('properties.owner', 'equals', v)] as [string, string, Condition]),
  text(ENVIRONMENTS).map((v) => ['properties.environment', v, c('properties.environment', 'equals', v)] as [string, string, Condition]),
  text(TIERS).map((v) => ['properties.tier', v, c('properties.tier', 'equals', v)] as [string, string, Condition]),
  fc.constantFrom(...CPUS, 3).map((v) => ['properties.cpu_count', String(v), c('properties.cpu_count', 'equals', v)] as [string, string, Condition]),
  fc.constantFrom(...MEMORIES).map((v) => ['properties.memory_gb', String(v), c('properties.memory_gb', 'equals', v)] as [string, string, Condition]),
  text(DATES).map((v) => ['properties.purchased_on', v, c('properties.purchased_on', 'equals', v)] as [string, string, Condition]),
  text(TAGS).map((v) => ['properties.tags', v, c('properties.tags', 'includes', v)] as [string, string, Condition]),
  fc.boolean().map((v) => ['properties.managed', String(v), c('properties.managed', 'equals', v)] as [string, string, Condition]),
)

/**
 * Who asks: the Admin key, or a Viewer key of role `it_editor` (domain `it` whole, servers of
 * `finance`, nothing without a domain) or of role `no_domain` (assets without a domain, and
 * applications of `finance`); each with the assets its roles reach.
 */
type Reader = 'admin' | 'it_editor' | 'no_domain'
const READERS: Record<Reader, (a: Asset) => boolean> = {
  admin: () => true,
  it_editor: (a) => a.access_domain_key === 'it' || (a.access_domain_key === 'finance' && a.asset_type_key === 'server'),
  no_domain: (a) => a.access_domain_key === null || (a.access_domain_key === 'finance' && a.asset_type_key === 'application'),
}
const reader = fc.constantFrom<Reader>('admin', 'it_editor', 'no_domain')
const QUERY_SETUP = {
  ...ACME,
  roles: [...ACME.roles, {
    key: 'no_domain', name: 'No domain', grants: [
      { access_domain_key: null, asset_type_keys: ['*'], level: 'view' },
      { access_domain_key: 'finance', asset_type_keys: ['application'], level: 'view' },
    ],
  }],
  users: ACME.users.map((u) => (u.email === 'owner@acme.test' ? { ...u, role_keys: [...u.role_keys, 'no_domain'] } : u)),
}

for (const store of STORES) {
  describe(`${store}: searches, lists and analytics against a model of their rules`, () => {
    let t: TestApp
    let live: Asset[]
    let links: Relationship[]
    /** Viewer keys of roles `it_editor` and `no_domain` (READERS). */
    const keys: Partial<Record<Reader, string>> = {}
    /** What a reader sees: the live assets its roles reach, and the relationships whose ends it sees both. */
    const view = (reader: Reader) => {
      const assets = live.filter((a) => READERS[reader](a))
      const byId = new Map(assets.map((a) => [a.id, a]))
      return { assets, byId, links: links.filter((r) => byId.has(r.source_asset_id) && byId.has(r.target_asset_id)), key: keys[reader] }
    }

    beforeAll(async () => {
      t = await createTestApp(store, QUERY_SETUP)
      for (const { type, items } of seedBodies()) {
        const res = await t.request('POST', '/api/v1/bulk/assets', { body: items.map((item) => ({ asset_type_key: type, ...item })) })
        expect(res.status).toBe(201)
      }
      const everyAsset = (await t.request('POST', '/api/v1/search/assets', { body: { page: { size: 100 } } })).body.data as Asset[]
      expect(everyAsset).toHaveLength(90)
      const sent = seedRelationships(everyAsset)
      expect((await t.request('POST', '/api/v1/bulk/relationships', { body: sent })).status).toBe(201)
      // Archived assets are never found, nor relationships with an archived end: a few of every
      // kind of value, archived.
      const some = await t.request('POST', '/api/v1/search/assets', { body: { sort: [{ field: 'name', order: 'desc' }], page: { size: 6 } } })
      for (const { id } of some.body.data as Asset[]) expect((await t.request('DELETE', `/api/v1/assets/${id}`)).status).toBe(204)
      const all = await t.request('POST', '/api/v1/search/assets', { body: { page: { size: 100 } } })
      expect(all.status).toBe(200)
      live = all.body.data
      expect(live).toHaveLength(90 - 6)
      const liveIds = new Set(live.map((a) => a.id))
      const seen = await t.request('POST', '/api/v1/search/relationships', { body: { page: { size: 100 } } })
      expect(seen.status).toBe(200)
      links = seen.body.data
      expect(links.length).toBe(sent.filter((r) => liveIds.has(r.source_asset_id) && liveIds.has(r.target_asset_id)).length)
      expect(links.length).toBeGreaterThan(60)
      keys.it_editor = await t.givenKey({ type: 'Viewer', roles: ['it_editor'] })
      keys.no_domain = await t.givenKey({ type: 'Viewer', roles: ['no_domain'] })
      for (const reader of ['it_editor', 'no_domain'] as const) {
        expect(view(reader).assets.length, reader).toBeGreaterThan(20)
        expect(view(reader).assets.length, reader).toBeLessThan(live.length - 20)
      }
    })
    afterAll(async () => t.close())

    it('selects and orders what the model selects and orders, for random filters and sorts', async () => {
      const sizes: number[] = []
      await fc.assert(
        fc.asyncProperty(filter, sort, reader, async (f, s, who) => {
          const seen = view(who)
          const res = await t.request('POST', '/api/v1/search/assets', { body: { filter: f, sort: s, page: { size: 100 } }, key: seen.key })
          expect(res.status, JSON.stringify(res.body)).toBe(200)
          const expected = order(seen.assets.filter((a) => matches(a, f)), s, read)
          expect((res.body.data as Asset[]).map((a) => `${a.name} ${a.id}`)).toEqual(expected.map((a) => `${a.name} ${a.id}`))
          expect(res.body.meta.page.total_items).toBe(expected.length)
          sizes.push(expected.length)
        }),
        { numRuns: RUNS },
      )
      // The filters split the assets (some found, some not) in about half of the runs (a fifth at
      // least, or the test says so): the model is not only ever compared on empty or whole lists.
      expect(sizes.filter((n) => n > 0 && n < live.length).length).toBeGreaterThan(RUNS / 5)
    })

    it('finds the relationships the model finds, by their own fields and their ends\' fields, in its order', async () => {
      const sizes: number[] = []
      await fc.assert(
        fc.asyncProperty(relationshipFilter(live.map((a) => a.id)), relationshipSort, reader, async (f, s, who) => {
          const seen = view(who)
          const res = await t.request('POST', '/api/v1/search/relationships', { body: { filter: f, sort: s, page: { size: 100 } }, key: seen.key })
          expect(res.status, JSON.stringify(res.body)).toBe(200)
          const expected = order(seen.links.filter((r) => relationshipMatches(r, f, seen.byId)), s, read)
          expect((res.body.data as Relationship[]).map((r) => r.id)).toEqual(expected.map((r) => r.id))
          expect(res.body.meta.page.total_items).toBe(expected.length)
          sizes.push(expected.length)
        }),
        { numRuns: RUNS },
      )
      expect(sizes.filter((n) => n > 0 && n < links.length).length).toBeGreaterThan(RUNS / 5)
    })

    it('cuts the same pages of the same order as the model, searched and listed, links included', async () => {
      const paging = fc.record({ size: fc.integer({ min: 1, max: 30 }), number: fc.integer({ min: 1, max: 12 }) })
      const pageNumber = (link: string | null): number | null => (link === null ? null : Number(new URL(link, 'http://x').searchParams.get('page[number]')))
      await fc.assert(
        fc.asyncProperty(filter, fc.uniqueArray(listFilter, { maxLength: 2, selector: ([field]) => field }), sort, paging, async (f, filters, s, page) => {
          const pageOf = (all: Asset[]) => all.slice((page.number - 1) * page.size, page.number * page.size).map((a) => a.id)
          const meta = (all: Asset[]) => ({ number: page.number, size: page.size, total_items: all.length, total_pages: Math.ceil(all.length / page.size) })

          const searched = await t.request('POST', '/api/v1/search/assets', { body: { filter: f, sort: s, page } })
          expect(searched.status, JSON.stringify(searched.body)).toBe(200)
          const found = order(live.filter((a) => matches(a, f)), s, read)
          expect((searched.body.data as Asset[]).map((a) => a.id)).toEqual(pageOf(found))
          expect(searched.body.meta.page).toMatchObject(meta(found))

          const query = new URLSearchParams([
            ...filters.map(([field, value]): [string, string] => [`filter[${field}]`, value]),
            ['sort', s.map(({ field, order: dir }) => (dir === 'desc' ? `-${field}` : field)).join(',')],
            ['page[number]', String(page.number)], ['page[size]', String(page.size)],
          ])
          const listed = await t.request('GET', `/api/v1/assets?${query}`)
          expect(listed.status, JSON.stringify(listed.body)).toBe(200)
          const all = order(live.filter((a) => filters.every(([, , condition]) => matches(a, condition))), s, read)
          expect((listed.body.data as Asset[]).map((a) => a.id)).toEqual(pageOf(all))
          expect(listed.body.meta.page).toMatchObject(meta(all))
          const pages = Math.ceil(all.length / page.size)
          const last = Math.max(pages, 1)
          const links = listed.body.links as Record<string, string | null>
          expect(Object.fromEntries(Object.entries(links).map(([k, v]) => [k, pageNumber(v)]))).toEqual({
            self: page.number, first: 1, prev: page.number > 1 ? Math.min(page.number - 1, last) : null, next: page.number < pages ? page.number + 1 : null, last,
          })
        }),
        { numRuns: RUNS },
      )
    })

    it('aggregates as the model does: groups, their order, breakdowns and every measure', async () => {
      await fc.assert(
        fc.asyncProperty(filter, analyticsBody, reader, async (f, body, who) => {
          const seen = view(who)
          // JSON drops a breakdown_by left undefined.
          const res = await t.request('POST', '/api/v1/analytics/assets', { body: JSON.parse(JSON.stringify({ filter: f, ...body })), key: seen.key })
          expect(res.status, JSON.stringify(res.body)).toBe(200)
          const expected = analytics(seen.assets.filter((a) => matches(a, f)), body.group_by, body.measures, body.breakdown_by, seen.links, seen.byId)
          expect(roundedAnswer(res.body.data)).toEqual(expected)
          expect(res.body.meta.total_groups).toBe(expected.length)
        }),
        { numRuns: RUNS },
      )
    })

    it('includes each found asset\'s relationships as the model pages, filters and sorts them', async () => {
      await fc.assert(
        fc.asyncProperty(condition, fc.option(includeFilter, { nil: undefined }), includeSort, fc.record({ number: fc.integer({ min: 1, max: 4 }), size: fc.integer({ min: 1, max: 5 }) }), reader,
          async (f, relFilter, relSort, relPage, who) => {
            const seen = view(who)
            const body = { filter: f, sort: [{ field: 'name' }], page: { size: 100 }, include: ['relationships', 'relationships.related_asset'], relationships: { page: relPage, sort: relSort, ...(relFilter === undefined ? {} : { filter: relFilter }) } }
            const res = await t.request('POST', '/api/v1/search/assets', { body, key: seen.key })
            expect(res.status, JSON.stringify(res.body)).toBe(200)
            const found = order(seen.assets.filter((a) => matches(a, f)), [{ field: 'name', order: 'asc' }], read)
            expect((res.body.data as Asset[]).map((a) => a.id)).toEqual(found.map((a) => a.id))
            for (const [i, asset] of found.entries()) {
              const all = order(entriesOf(asset, seen.links, seen.byId).filter((e) => relFilter === undefined || tree(relFilter, (cond) => holds(readEntry(e, cond.field), cond))),
                relSort.length === 0 ? [{ field: 'created_at', order: 'asc' }] : relSort, readEntry)
              const page = all.slice((relPage.number - 1) * relPage.size, relPage.number * relPage.size)
              const got = res.body.data[i]
              expect(got.relationships.map((e: { id: string; direction: string; related_asset_id: string; related_asset: { name: string } }) => [e.id, e.direction, e.related_asset_id, e.related_asset.name]),
                asset.name).toEqual(page.map((e) => [e.id, e.direction, e.related.id, e.related.name]))
              expect(got.relationships_meta.page).toEqual({ number: relPage.number, size: relPage.size, total_items: all.length, total_items_exact: true, total_pages: Math.ceil(all.length / relPage.size) })
            }
          }),
        { numRuns: RUNS },
      )
    })

    it('includes each listed asset\'s relationships as the model pages, filters and sorts them (query-string form)', async () => {
      const queryFilter = fc.uniqueArray(fc.oneof(
        text(['runs_on', 'depends_on']).map((v) => ['relationship_type_key', v] as const),
        text(['outgoing', 'incoming']).map((v) => ['direction', v] as const),
        text(['server', 'application', 'note']).map((v) => ['related_asset.asset_type_key', v] as const),
        text(NAMES).map((v) => ['related_asset.name', v] as const),
      ), { maxLength: 2, selector: ([field]) => field })
      await fc.assert(
        fc.asyncProperty(listFilter, queryFilter, includeSort, fc.record({ number: fc.integer({ min: 1, max: 4 }), size: fc.integer({ min: 1, max: 5 }) }), reader,
          async ([field, value, assetCondition], relFilter, relSort, relPage, who) => {
            const seen = view(who)
            const query = new URLSearchParams([
              [`filter[${field}]`, value], ['sort', 'name'], ['page[size]', '100'], ['include', 'relationships,relationships.related_asset'],
              ...relFilter.map(([f, v]): [string, string] => [`relationships_filter[${f}]`, v]),
              ...(relSort.length === 0 ? [] : [['relationships_sort', relSort.map((x) => (x.order === 'desc' ? `-${x.field}` : x.field)).join(',')] as [string, string]]),
              ['relationships_page[number]', String(relPage.number)], ['relationships_page[size]', String(relPage.size)],
            ])
            const res = await t.request('GET', `/api/v1/assets?${query}`, { key: seen.key })
            expect(res.status, JSON.stringify(res.body)).toBe(200)
            const found = order(seen.assets.filter((a) => matches(a, assetCondition)), [{ field: 'name', order: 'asc' }], read)
            expect((res.body.data as Asset[]).map((a) => a.id)).toEqual(found.map((a) => a.id))
            for (const [i, asset] of found.entries()) {
              const all = order(entriesOf(asset, seen.links, seen.byId).filter((e) => relFilter.every(([f, v]) => readEntry(e, f) === v)),
                relSort.length === 0 ? [{ field: 'created_at', order: 'asc' }] : relSort, readEntry)
              const page = all.slice((relPage.number - 1) * relPage.size, relPage.number * relPage.size)
              const got = res.body.data[i]
              expect(got.relationships.map((e: { id: string; direction: string; related_asset_id: string }) => [e.id, e.direction, e.related_asset_id]), asset.name)
                .toEqual(page.map((e) => [e.id, e.direction, e.related.id]))
              expect(got.relationships_meta.page.total_items).toBe(all.length)
            }
          }),
        { numRuns: RUNS },
      )
    })

    it('lists what the model selects and orders for random GET filters and sorts', async () => {
      await fc.assert(
        fc.asyncProperty(fc.uniqueArray(listFilter, { maxLength: 3, selector: ([field]) => field }), sort, async (filters, s) => {
          const query = new URLSearchParams([
            ...filters.map(([field, value]): [string, string] => [`filter[${field}]`, value]),
            ['sort', s.map(({ field, order: dir }) => (dir === 'desc' ? `-${field}` : field)).join(',')],
            ['page[size]', '100'],
          ])
          const res = await t.request('GET', `/api/v1/assets?${query}`)
          expect(res.status, JSON.stringify(res.body)).toBe(200)
          const expected = order(live.filter((a) => filters.every(([, , condition]) => matches(a, condition))), s, read)
          expect((res.body.data as Asset[]).map((a) => `${a.name} ${a.id}`)).toEqual(expected.map((a) => `${a.name} ${a.id}`))
          expect(res.body.meta.page.total_items).toBe(expected.length)
        }),
        { numRuns: RUNS },
      )
    })
  })
}
