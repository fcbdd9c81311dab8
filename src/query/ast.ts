/**
 * The parsed shape of a filter (stage 1 of parse → resolve → compile). Nothing here is checked
 * against the metamodel yet: `field` is any string and `value` any JSON value. Each node keeps the
 * JSON pointer of the object it came from, so later stages can point errors into the request body.
 */

/** The operators of the specification ("Search body rules"), in its order. */
export const OPERATORS = [
  'equals', 'not_equals',
  'greater_than', 'greater_than_or_equals', 'less_than', 'less_than_or_equals',
  'contains', 'not_contains', 'starts_with',
  'includes', 'not_includes',
  'in', 'not_in',
  'is_empty', 'is_not_empty',
] as const
export type Operator = (typeof OPERATORS)[number]

const OPERATOR_SET: ReadonlySet<string> = new Set(OPERATORS)

export function isOperator(value: unknown): value is Operator {
  return typeof value === 'string' && OPERATOR_SET.has(value)
}

export type GroupKind = 'and' | 'or'

export interface GroupNode {
  readonly kind: GroupKind
  readonly children: readonly FilterNode[]
  readonly pointer: string
}

export interface ConditionNode {
  readonly kind: 'condition'
  readonly field: string
  readonly operator: Operator
  /** `undefined` when the member was absent (is_empty and is_not_empty take none). */
  readonly value: unknown
  readonly pointer: string
}

export type FilterNode = GroupNode | ConditionNode

export function groupNode(kind: GroupKind, children: readonly FilterNode[], pointer: string): GroupNode {
  return Object.freeze({ kind, children: Object.freeze([...children]), pointer })
}

export function conditionNode(field: string, operator: Operator, value: unknown, pointer: string): ConditionNode {
  return Object.freeze({ kind: 'condition' as const, field, operator, value, pointer })
}
