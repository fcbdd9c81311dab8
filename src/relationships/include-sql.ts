import type { AuthContext } from '../core/auth/context.js'
import type { Queryable } from '../store/db.js'
import { escapeLike, Params } from '../store/sql.js'
import { ILIKE } from '../query/compile.js'
import { scopeCondition } from '../access/scope.js'
import { offsetOf, type Page } from '../core/pagination.js'
import type { Direction } from './embedded-sql.js'

export type IncludeSortField = 'created_at' | 'relationship_type_key' | 'related_asset.name'

export interface IncludeSort {
  field: IncludeSortField
  order: 'asc' | 'desc'
}

/** The fields included relationships are filtered on (CONTRACT §3's, and the related asset's name). */
export type IncludeFilterField = 'relationship_type_key' | 'direction' | 'related_asset.asset_type_key' | 'related_asset.name'

/** The operators of those fields: equality on all, text matches on the related asset's name. */
export type IncludeOperator = 'equals' | 'not_equals' | 'in' | 'not_in' | 'contains' | 'not_contains' | 'starts_with'

/** One condition, checked: `values` holds one value, or the list of `in`/`not_in`. */
export interface IncludeCondition {
  readonly kind: 'condition'
  readonly field: IncludeFilterField
  readonly operator: IncludeOperator
  readonly values: readonly string[]
}

export interface IncludeGroup {
  readonly kind: 'and' | 'or'
  readonly children: readonly IncludeFilterNode[]
}

export type IncludeFilterNode = IncludeCondition | IncludeGroup

/** What the included relationships are filtered by (a search body's tree, or the query string's `and` of `in`s); null: none. */
export type IncludeFilter = IncludeFilterNode | null

export interface IncludeQuery {
  page: Page
  filter: IncludeFilter
  sort: readonly IncludeSort[]
  withProperties: boolean
}

/** One included relationship of one asset, numbered `rn` in the asset's order. */
export interface IncludedRow {
  asset_id: string
  total: number
  rn: number
  id: string
  relationship_type_key: string
  direction: Direction
  related_id: string
  related_asset_type_key: string
  related_name: string
  related_created_at: Date | string
  related_updated_at: Date | string
  related_properties?: Record<string, unknown>
}

// Sort keys come only from this map: the field names of a request never reach SQL.
const SORT_COLUMN: Readonly<Record<IncludeSortField, string>> = {
  created_at: 'created_at',
  relationship_type_key: 'relationship_type_key',
  'related_asset.name': 'related_name',
}

// Over `base b` (the relationship seen from the asset) and `assets o` (the related asset); the
// direction's expression is the caller's (see selfLoopOnce).
const FILTER_EXPR: Readonly<Record<Exclude<IncludeFilterField, 'direction'>, string>> = {
  relationship_type_key: 'b.relationship_type_key',
  'related_asset.asset_type_key': 'o.asset_type_key',
  'related_asset.name': 'o.name',
}

/**
 * The included relationships of a whole page of assets in ONE statement, whatever the number of
 * assets (no query per asset): both directions of every asset are gathered, joined to the
 * related asset (live and visible to the key, in the same statement), filtered, then numbered
 * per asset with `row_number() OVER (PARTITION BY asset_id …)` so that each asset gets its own
 * page, and counted per asset with `count(*) OVER (PARTITION BY asset_id)`. Row 1 of every asset
 * is always returned (it carries the total even when the page asked for is past the end); the
 * caller drops it when it is not on the page.
 *
 * Plan shape, on purpose: each step is a LATERAL subquery fenced with `OFFSET 0`, so the planner
 * can neither flatten and reorder it nor push conditions into it. It always walks page ids →
 * index lookups of their relationships (relationships_unique leads with the source,
 * relationships_target with the target) → primary-key lookups of the related assets, whose
 * liveness and scope are checked on the row outside the fence (inside, `archived_at IS NULL`
 * would make the partial assets_live_* indexes candidates, scanned whole per lookup). Cost is
 * linear in the relationships of the page. Without the fences a store without statistics (PGlite
 * has no autovacuum; PostgreSQL right after a bulk load) estimated `assets` at one row and
 * rescanned every relationship once per asset: minutes for 100 × 100 relationships.
 */
export async function selectIncludedRelationships(db: Queryable, auth: AuthContext, assetIds: readonly string[], q: IncludeQuery): Promise<IncludedRow[]> {
  if (assetIds.length === 0) return []
  const params = new Params([auth.orgId, [...new Set(assetIds)]])
  const scope = scopeCondition(auth, 'o', 'view', params)
  const filters = compileIncludeFilter(q.filter, params, 'b.direction')
  // One entry per relationship (CONTRACT §2): a self-loop is its asset's outgoing one, and its
  // incoming one only where the filter leaves out the outgoing one (it asks for incoming ones).
  // A filter that does not name the direction takes both or neither: the incoming copy is not read.
  const namesDirection = usesDirection(q.filter)
  const selfOnce = namesDirection ? '' : ' AND r.source_asset_id <> r.target_asset_id'
  const selfLoopOnce = namesDirection
    ? ` AND (b.direction = 'outgoing' OR b.related_id <> ids.asset_id OR NOT ${compileIncludeFilter(q.filter, params, "'outgoing'::text")})`
    : ''
  const from = params.add(offsetOf(q.page))
  const to = params.add(offsetOf(q.page) + q.page.size)
  const props = q.withProperties ? ', o.properties AS related_properties' : ''
  const result = await db.query<IncludedRow>(
    `SELECT p.asset_id, p.total::int AS total, p.rn::int AS rn, p.id, p.relationship_type_key, p.direction, p.related_id, p.related_asset_type_key, p.related_name,
            p.related_created_at, p.related_updated_at${q.withProperties ? ', p.related_properties' : ''}
     FROM (
       SELECT v.*, row_number() OVER (PARTITION BY v.asset_id ORDER BY ${orderBy(q.sort, 'v')}) AS rn,
              count(*) OVER (PARTITION BY v.asset_id) AS total
       FROM (
         SELECT ids.asset_id, b.id, b.relationship_type_key, b.direction, b.related_id, b.created_at,
                o.asset_type_key AS related_asset_type_key, o.name AS related_name,
                o.created_at AS related_created_at, o.updated_at AS related_updated_at${props}
         FROM unnest($2::uuid[]) AS ids(asset_id)
         CROSS JOIN LATERAL (
           SELECT r.id, r.relationship_type_key, 'outgoing'::text AS direction, r.target_asset_id AS related_id, r.created_at
           FROM relationships r WHERE r.org_id = $1 AND r.source_asset_id = ids.asset_id
           UNION ALL
           SELECT r.id, r.relationship_type_key, 'incoming'::text, r.source_asset_id, r.created_at
           FROM relationships r WHERE r.org_id = $1 AND r.target_asset_id = ids.asset_id${selfOnce}
           OFFSET 0
         ) b
         CROSS JOIN LATERAL (SELECT o.* FROM assets o WHERE o.org_id = $1 AND o.id = b.related_id OFFSET 0) o
         WHERE o.archived_at IS NULL AND ${scope} AND ${filters}${selfLoopOnce}
       ) v
     ) p
     WHERE p.rn = 1 OR (p.rn > ${from}::bigint AND p.rn <= ${to}::bigint)
     ORDER BY p.asset_id, p.rn`,
    params.values,
    { jsonRows: { timestamps: ['related_created_at', 'related_updated_at'] } },
  )
  return result.rows
}

/**
 * The filter as SQL over `b` and `o`, the direction read from `direction` (an expression: the
 * relationship's, or a fixed one). Values are parameters; fields come from FILTER_EXPR. No column
 * here is ever null, so a negation needs no care for nulls.
 */
export function compileIncludeFilter(node: IncludeFilter, params: Params, direction: string): string {
  if (node === null) return 'TRUE'
  if (node.kind !== 'condition') {
    if (node.children.length === 0) return node.kind === 'and' ? 'TRUE' : 'FALSE'
    return `(${node.children.map((child) => compileIncludeFilter(child, params, direction)).join(node.kind === 'and' ? ' AND ' : ' OR ')})`
  }
  const expr = node.field === 'direction' ? direction : FILTER_EXPR[node.field]
  const [value] = node.values as [string]
  switch (node.operator) {
    case 'equals': return `${expr} = ${params.add(value)}::text`
    case 'not_equals': return `${expr} <> ${params.add(value)}::text`
    // One array parameter whatever the number of values (= ANY), so the statement text is stable.
    case 'in': return `${expr} = ANY(${params.add([...node.values])}::text[])`
    case 'not_in': return `NOT (${expr} = ANY(${params.add([...node.values])}::text[]))`
    case 'contains': return ILIKE(expr, params.add(`%${escapeLike(value)}%`))
    case 'not_contains': return `NOT (${ILIKE(expr, params.add(`%${escapeLike(value)}%`))})`
    case 'starts_with': return ILIKE(expr, params.add(`${escapeLike(value)}%`))
  }
}

function usesDirection(node: IncludeFilter): boolean {
  if (node === null) return false
  return node.kind === 'condition' ? node.field === 'direction' : node.children.some(usesDirection)
}

/** Default created_at; the relationship id then the direction break ties. */
function orderBy(sort: readonly IncludeSort[], alias: string): string {
  const specs = sort.length === 0 ? [{ field: 'created_at', order: 'asc' } as const] : sort
  const keys = specs.map((s) => `${alias}.${SORT_COLUMN[s.field]} ${s.order.toUpperCase()}`)
  return [...keys, `${alias}.id ASC`, `${alias}.direction ASC`].join(', ')
}
