import { AppError, Errors } from '../core/errors.js'
import { escapePointer, isObject } from '../core/json.js'
import { OPERATORS, conditionNode, groupNode, isOperator, type FilterNode, type GroupKind, type GroupNode } from './ast.js'
import { MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH, MAX_FILTER_OPERAND_SIZE } from './limits.js'

/**
 * Stage 1 of parse → resolve → compile: checks the *shape* of a search filter and builds frozen
 * {@link FilterNode}s that remember their JSON pointer. Fields, operators' fit and values are
 * checked later by `resolveFilter` against the metamodel.
 *
 * `undefined`, `null` and `{}` mean "no filter" and give `null`.
 *
 * @example
 *   parseFilter({ or: [{ field: 'name', operator: 'starts_with', value: 'db-' }] })
 *   // → { kind: 'or', pointer: '/filter', children: [
 *   //      { kind: 'condition', field: 'name', operator: 'starts_with', value: 'db-', pointer: '/filter/or/0' }] }
 * @throws AppError invalid_filter with `source.pointer`, e.g. `/filter/or/0/operator`
 */
export function parseFilter(json: unknown, basePointer = '/filter'): FilterNode | null {
  if (json === undefined || json === null) return null
  if (isObject(json) && Object.keys(json).length === 0) return null
  return parseNode(json, basePointer, 0, { conditions: 0, operands: 0 })
}

interface ParseState {
  conditions: number
  /** Operand size so far (see MAX_FILTER_OPERAND_SIZE). */
  operands: number
}

/** A string counts its characters, a list its items, anything else 1. */
function operandSize(value: unknown): number {
  if (typeof value === 'string') return value.length
  if (Array.isArray(value)) return value.length
  return 1
}

function parseNode(json: unknown, pointer: string, depth: number, state: ParseState): FilterNode {
  if (!isObject(json)) {
    fail(pointer, 'a filter node must be an object: a condition {"field", "operator", "value"} or a group {"and": [...]} or {"or": [...]}')
  }
  if ('and' in json || 'or' in json) return parseGroup(json, pointer, depth, state)
  return parseCondition(json, pointer, state)
}

function parseGroup(json: Record<string, unknown>, pointer: string, depth: number, state: ParseState): GroupNode {
  const kind: GroupKind = 'and' in json ? 'and' : 'or'
  const extra = Object.keys(json).find((key) => key !== kind)
  if (extra === 'or') fail(pointer, 'a group has exactly one member, "and" or "or", not both')
  if (extra !== undefined) fail(`${pointer}/${escapePointer(extra)}`, `unknown member "${extra}" in a group; a group has exactly one member, "and" or "or"`)
  // Depth counts group levels: the root group is level 1. Checked before descending, so
  // recursion never goes deeper than the limit whatever the body holds.
  if (depth + 1 > MAX_FILTER_DEPTH) fail(pointer, `filter groups nest at most ${MAX_FILTER_DEPTH} levels deep`)
  const listPointer = `${pointer}/${kind}`
  const list = json[kind]
  if (!Array.isArray(list)) fail(listPointer, `"${kind}" must be an array of filter nodes`)
  const children = list.map((child, i) => parseNode(child, `${listPointer}/${i}`, depth + 1, state))
  return groupNode(kind, children, pointer)
}

const CONDITION_MEMBERS = new Set(['field', 'operator', 'value'])

function parseCondition(json: Record<string, unknown>, pointer: string, state: ParseState): FilterNode {
  state.conditions += 1
  if (state.conditions > MAX_FILTER_CONDITIONS) fail(pointer, `a filter has at most ${MAX_FILTER_CONDITIONS} conditions`)
  const extra = Object.keys(json).find((key) => !CONDITION_MEMBERS.has(key))
  if (extra !== undefined) {
    fail(`${pointer}/${escapePointer(extra)}`, `unknown member "${extra}" in a condition; a condition has "field", "operator" and "value"`)
  }
  const { field, operator } = json
  if (field === undefined) fail(`${pointer}/field`, 'a condition needs "field"')
  if (typeof field !== 'string' || field === '') fail(`${pointer}/field`, 'field must be a non-empty string')
  if (operator === undefined) fail(`${pointer}/operator`, 'a condition needs "operator"')
  if (!isOperator(operator)) {
    const shown = typeof operator === 'string' ? `"${operator}"` : 'a non-string'
    fail(`${pointer}/operator`, `unknown operator ${shown}; operators are ${OPERATORS.join(', ')}`)
  }
  state.operands += operandSize(json.value)
  if (state.operands > MAX_FILTER_OPERAND_SIZE) {
    fail(`${pointer}/value`, `the operands of a filter total at most ${MAX_FILTER_OPERAND_SIZE.toLocaleString('en-US')} `
      + '(each string counts its characters, each list its items); narrow the filter or split the search')
  }
  return conditionNode(field, operator, json.value, pointer)
}

function fail(pointer: string, detail: string): never {
  throw new AppError(Errors.INVALID_FILTER, [{ detail, pointer }])
}
