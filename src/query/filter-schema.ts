import { isObject } from '../core/json.js'
import { OPERATORS } from './ast.js'
import { MAX_FILTER_CONDITIONS } from './limits.js'
import { parseFilter } from './parse.js'

/** The component name of a filter node in the OpenAPI document, and the `$id` the body schemas refer to it by. */
export const FILTER_NODE_ID = 'SearchFilterNode'

const nodeRef = { $ref: `${FILTER_NODE_ID}#` } as const

/**
 * A node of a search filter: a condition or a group, groups holding nodes (CONTRACT §4). It takes
 * every filter the hand parser takes (parse.ts) and describes its shape; the depth, the
 * number of conditions and the operand size are the parser's, and a failure under `/filter` is
 * reported with the parser's own detail (search/schemas.ts, SEARCH_BODY_CODES). Whether a field exists and a value
 * fits it depends on the organization's metamodel (resolve.ts).
 */
export const filterNodeSchema = {
  $id: FILTER_NODE_ID,
  title: FILTER_NODE_ID,
  description: 'A condition {"field", "operator", "value"} or a group {"and": [...]} / {"or": [...]} of nodes.',
  oneOf: [
    {
      title: 'SearchCondition',
      type: 'object',
      required: ['field', 'operator'],
      additionalProperties: false,
      properties: {
        field: { type: 'string', minLength: 1, description: 'A column (id, name, asset_type_key, …) or `properties.<key>`; docs/search.md lists them.' },
        operator: { type: 'string', enum: [...OPERATORS] },
        value: {
          description: 'What the field is compared with, of the field\'s type; an array for in and not_in; one option for '
            + 'includes and not_includes; none for is_empty and is_not_empty.',
        },
      },
    },
    { title: 'SearchAndGroup', type: 'object', required: ['and'], additionalProperties: false, properties: { and: { type: 'array', items: nodeRef, description: 'Every node matches.' } } },
    { title: 'SearchOrGroup', type: 'object', required: ['or'], additionalProperties: false, properties: { or: { type: 'array', items: nodeRef, description: 'At least one node matches.' } } },
  ],
} as const

/** A search body's `filter`: a node, or null or {} for none. */
export const filterSchema = {
  description: 'A condition {"field", "operator", "value"} or a group {"and": [...]} / {"or": [...]}, '
    + 'nested up to 10 levels, 500 conditions and an operand size of 10,000 (docs/search.md); null or {}: no filter.',
  oneOf: [nodeRef, { type: 'null' }, { type: 'object', maxProperties: 0 }],
  examples: [{ or: [
    { and: [{ field: 'properties.environment', operator: 'equals', value: 'prod' }, { field: 'properties.cpu_count', operator: 'greater_than_or_equals', value: 16 }] },
    { field: 'name', operator: 'starts_with', value: 'db-' },
  ] }],
} as const

/**
 * Nodes of a filter beyond which the parser reads it before the schema does: more than a filter
 * of MAX_FILTER_CONDITIONS conditions, each in a group of its own, holds.
 */
export const FILTER_NODES_BEFORE_SCHEMA = 2 * MAX_FILTER_CONDITIONS

/**
 * Reads a large filter by hand before the route's schema checks it (preValidation of the routes
 * whose body holds one: search, analytics). Ajv's check of the recursive node schema takes time
 * in the square of its failing nodes (each reference copies every error gathered so far): a
 * 80 KB body of 40,000 bad nodes held the event loop for 25 s. The parser stops at the first
 * failure (depth, conditions, a node that is no node), which is then the answer; a filter it
 * takes, the schema takes too, without a failure to gather.
 */
export function parseLargeFilterFirst(body: unknown): void {
  const filter = isObject(body) ? body.filter : undefined
  if (holdsMoreNodes(filter, FILTER_NODES_BEFORE_SCHEMA)) parseFilter(filter, '/filter')
}

/** Whether the groups of `filter` hold more than `limit` nodes in all; stops counting there. */
function holdsMoreNodes(filter: unknown, limit: number): boolean {
  const groups: unknown[] = [filter]
  let nodes = 0
  for (let node = groups.pop(); node !== undefined; node = groups.pop()) {
    if (!isObject(node)) continue
    for (const list of [node.and, node.or]) {
      if (!Array.isArray(list)) continue
      nodes += list.length
      if (nodes > limit) return true
      for (const child of list) groups.push(child)
    }
  }
  return false
}
