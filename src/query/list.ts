import type { Metamodel } from '../metamodel/types.js'
import { conditionNode, groupNode, type ConditionNode, type FilterNode, type GroupNode } from './ast.js'
import { LIST_FILTER_COLUMNS, PROPERTY_PREFIX, listFieldsText, type Target } from './fields.js'
import { MAX_FILTER_CONDITIONS } from './limits.js'
import { failFilter, listSource, resolveCondition, type ResolvedNode } from './resolve.js'
import { describeValue } from './values.js'

/**
 * List filters of `GET /assets` and `GET /relationships` (CONTRACT §3): `filter[<field>]=<value>`,
 * equality only, several ANDed. They go through the same resolve and compile stages as search
 * filters; only the reading of values (strings from the query) and the error source differ.
 */

const LIST_FILTER_KEY = /^filter\[(.*)\]$/s

/**
 * Reads every query parameter named `filter[<field>]` into an `equals` condition whose value is
 * still the raw string; {@link resolveListFilters} parses it by the field's type. The result is one
 * `and` group (empty, i.e. `TRUE`, without filters). Conditions carry no pointer: issues about
 * them name the parameter (`source.parameter`).
 *
 * @example parseListFilters({ 'filter[name]': 'web-01', 'page[size]': 10 })
 *   // → { kind: 'and', pointer: '', children: [{ kind: 'condition', field: 'name', operator: 'equals', value: 'web-01', pointer: '' }] }
 * @throws AppError invalid_filter, e.g. a parameter given twice (Fastify then hands over an array)
 */
export function parseListFilters(query: Record<string, unknown>): GroupNode {
  const children: FilterNode[] = []
  for (const [key, raw] of Object.entries(query)) {
    const match = LIST_FILTER_KEY.exec(key)
    if (match === null) continue
    const field = match[1] ?? ''
    const at = { parameter: key }
    if (field === '') failFilter(at, `${key} names no field; use filter[<field>]=<value>`)
    if (Array.isArray(raw)) failFilter(at, `${key} is given more than once; a list filter takes one value (search with "in" for several)`)
    if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean') failFilter(at, `${key} must be a single value`)
    if (children.length >= MAX_FILTER_CONDITIONS) failFilter(at, `a filter has at most ${MAX_FILTER_CONDITIONS} conditions`)
    children.push(conditionNode(field, 'equals', String(raw), ''))
  }
  return groupNode('and', children, '')
}

/**
 * `filter[access_domain_key]=` (an empty value): the assets with no access domain (`null`, CONTRACT
 * §2). No domain key is empty (keys match `^[a-z][a-z0-9_]{0,62}$`), so the empty value can mean
 * nothing else, and an equality filter has no other way to ask for null.
 */
function noDomainAsEmpty(condition: ConditionNode): ConditionNode {
  return condition.field === 'access_domain_key' && condition.value === '' ? conditionNode('access_domain_key', 'is_empty', undefined, condition.pointer) : condition
}

/**
 * Resolves the group of {@link parseListFilters}: each string is parsed by the field's type
 * (`"16"` → 16, `"true"` → true, dates and UUIDs checked); on a multi-select, equality means "the
 * array includes the value". `source_asset_id` / `target_asset_id` also take a composite key
 * `server:hostname:web-01`, looked up inside the compiled statement.
 *
 * @example resolveListFilters(parseListFilters({ 'filter[properties.tags]': 'web' }), 'assets', mm)
 *   // compiled: a.properties @> $1::jsonb   values ['{"tags":["web"]}']
 * @throws AppError invalid_filter with `source.parameter`, e.g. `filter[properties.cpu_count]`
 */
export function resolveListFilters(node: GroupNode, target: Target, metamodel: Metamodel): ResolvedNode {
  const children = node.children.map((child) => {
    if (child.kind !== 'condition') throw new Error('list filters are a flat group of conditions')
    const source = listSource(`filter[${child.field}]`)
    const listed = LIST_FILTER_COLUMNS[target].includes(child.field)
      || (target === 'assets' && child.field.startsWith(PROPERTY_PREFIX))
    if (!listed) {
      failFilter(source.locate('field'), `unknown list filter field ${describeValue(child.field)}; list filters take ${listFieldsText(target)}`)
    }
    return resolveCondition(noDomainAsEmpty(child), target, metamodel, source)
  })
  return Object.freeze({ kind: 'and', children: Object.freeze(children) })
}
