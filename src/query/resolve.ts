import { parseAssetRef } from '../metamodel/refs.js'
import { AppError, Errors, assertNever, type Issue } from '../core/errors.js'
import { isUuid } from '../core/time.js'
import type { Metamodel } from '../metamodel/types.js'
import type { ConditionNode, FilterNode, GroupKind, Operator } from './ast.js'
import {
  OPERATORS_BY_TYPE, PROPERTY_PREFIX, columnField, describeField, filterFieldsText, lookupField, operatorFits, type FieldRef, type RelatedEnd, type ResolvedField, type Target,
} from './fields.js'
import { describeValue, fromJson, fromString, isMismatch, type Checked, type Scalar } from './values.js'

/**
 * Stage 2 of parse → resolve → compile: the whitelist. Every field is looked up in a fixed map of
 * system columns or in the metamodel, every operator checked against the field's type, every
 * value checked and normalized. What comes out can be compiled without further checks.
 */

export type ResolvedValue =
  | { readonly kind: 'none' }
  | { readonly kind: 'scalar'; readonly value: Scalar }
  | { readonly kind: 'list'; readonly values: readonly Scalar[] }
  /** A composite key naming an asset; compiled to an index lookup on (asset_type_key, unique_value). */
  | { readonly kind: 'asset_ref'; readonly asset_type_key: string; readonly unique_value: string }
  /** `in`/`not_in` on a field naming assets, with at least one composite key among the values. */
  | { readonly kind: 'asset_refs'; readonly ids: readonly string[]; readonly keys: readonly AssetCompositeKey[] }

export interface AssetCompositeKey {
  readonly asset_type_key: string
  readonly unique_value: string
}

export interface ResolvedCondition {
  readonly kind: 'condition'
  readonly field: ResolvedField
  readonly operator: Operator
  readonly value: ResolvedValue
}

export interface ResolvedGroup {
  readonly kind: GroupKind
  readonly children: readonly ResolvedNode[]
}

/** A condition on the source or target asset of a relationship (compiled to `EXISTS`). */
export interface RelatedCondition {
  readonly kind: 'related'
  readonly end: RelatedEnd
  readonly condition: ResolvedCondition
}

/**
 * An already-compiled SQL fragment, e.g. an access-control scope. `text` refers to the alias given
 * to `compileFilter` and to its values as `$1`…`$k` (its own numbering, and no other `$` sign);
 * the compiler binds the values through its `Params` and renumbers.
 */
export interface SqlFragment {
  readonly kind: 'sql'
  readonly text: string
  readonly values: readonly unknown[]
}

export type ResolvedNode = ResolvedGroup | ResolvedCondition | RelatedCondition | SqlFragment

/** Matches everything: an empty `and`. */
export const MATCH_ALL: ResolvedNode = Object.freeze({ kind: 'and', children: Object.freeze([]) })

/** Matches nothing: an empty `or` (e.g. the scope of a key without grants). */
export const MATCH_NONE: ResolvedNode = Object.freeze({ kind: 'or', children: Object.freeze([]) })

/** Wraps a compiled fragment as a node. @example sqlNode('a.access_domain_key = ANY($1::text[])', [['it']]) */
export function sqlNode(text: string, values: readonly unknown[] = []): SqlFragment {
  return Object.freeze({ kind: 'sql', text, values: Object.freeze([...values]) })
}

/**
 * An equality on a system column, built in code (never from a request): e.g. one relationship by
 * id, `columnCondition('relationships', 'id', id)`.
 */
export function columnCondition(target: Target, column: string, value: Scalar): ResolvedCondition {
  const field = columnField(target, column)
  if (field === undefined) throw new Error(`no column ${column} on ${target}`)
  return Object.freeze({ kind: 'condition', field, operator: 'equals', value: Object.freeze({ kind: 'scalar', value }) })
}

/** ANDs nodes together, e.g. the request's filter with an access scope: `andNodes(filter, scope)`. */
export function andNodes(...nodes: ResolvedNode[]): ResolvedNode {
  return Object.freeze({ kind: 'and', children: Object.freeze([...nodes]) })
}

/**
 * Resolves a parsed search filter against the metamodel for `/search/assets` or
 * `/search/relationships`. `null` (no filter) resolves to {@link MATCH_ALL}.
 *
 * @example resolveFilter(parseFilter({ field: 'properties.cpu_count', operator: 'greater_than', value: 16 }), 'assets', mm)
 *   // → { kind: 'condition', field: { kind: 'property', key: 'cpu_count', type: 'number' },
 *   //     operator: 'greater_than', value: { kind: 'scalar', value: 16 } }
 *   // compiled: (CASE WHEN jsonb_typeof(a.properties->'cpu_count') = 'number' THEN (a.properties->>'cpu_count')::numeric END) > $1
 * @throws AppError invalid_filter pointing at `…/field`, `…/operator` or `…/value`
 */
export function resolveFilter(node: FilterNode | null, target: Target, metamodel: Metamodel): ResolvedNode {
  if (node === null) return MATCH_ALL
  switch (node.kind) {
    case 'and': case 'or':
      return Object.freeze({ kind: node.kind, children: Object.freeze(node.children.map((c) => resolveFilter(c, target, metamodel))) })
    case 'condition':
      return resolveCondition(node, target, metamodel, bodySource(node.pointer))
    default:
      return assertNever(node)
  }
}

type Member = 'field' | 'operator' | 'value'

/** Where issues about one condition point, and how its values arrive (body JSON or query string). */
export interface Source {
  readonly list: boolean
  locate(member: Member, index?: number): Pick<Issue, 'pointer' | 'parameter'>
}

function bodySource(pointer: string): Source {
  return { list: false, locate: (member, index) => ({ pointer: `${pointer}/${member}${index === undefined ? '' : `/${index}`}` }) }
}

/** Issues name the query parameter; values are strings parsed by the field's type. */
export function listSource(parameter: string): Source {
  return { list: true, locate: () => ({ parameter }) }
}

interface Failure {
  readonly failure: Issue
}

/** Resolves one condition; `source` says where its issues point and how its value arrives. */
export function resolveCondition(cond: ConditionNode, target: Target, metamodel: Metamodel, source: Source): ResolvedNode {
  const ref = lookupField(cond.field, target, metamodel)
  if (ref === null) failFilter(source.locate('field'), unknownFieldDetail(cond.field, target))
  // A list filter is equality, which on a multi-select means membership (CONTRACT §3).
  const operatorFor = (field: ResolvedField): Operator => (source.list && field.type === 'multi' ? 'includes' : cond.operator)
  const fitting = ref.candidates.filter((field) => operatorFits(field.type, operatorFor(field)))
  if (fitting.length === 0) failFilter(source.locate('operator'), unfitOperatorDetail(cond.operator, ref))
  // Emptiness of a key with several value kinds (an integer `size` on one asset type, a text
  // `size` on another) is about every kind: empty when empty in each, set when set in any.
  if ((cond.operator === 'is_empty' || cond.operator === 'is_not_empty') && fitting.length > 1) {
    if (cond.value !== undefined && cond.value !== null) failFilter(source.locate('value'), `${cond.operator} takes no value`)
    const children = fitting.map((field) => wrap(ref, Object.freeze({ kind: 'condition', field, operator: cond.operator, value: NONE })))
    return Object.freeze({ kind: cond.operator === 'is_empty' ? 'and' : 'or', children: Object.freeze(children) })
  }
  // A key with several value kinds takes the first kind (metamodel order) its value fits. A GET
  // list's equality, whose value is URL text, takes every kind it fits, any of them: each asset
  // matches as its own type reads the value (a select `tier` on one asset type, a multi-select
  // `tier` on another; a text `owner` and an integer one).
  let first: Failure | undefined
  const matches: (ResolvedCondition | RelatedCondition)[] = []
  for (const field of fitting) {
    const value = resolveValue(field, operatorFor(field), cond.value, { ref, source, metamodel })
    if ('failure' in value) {
      first ??= value
      continue
    }
    matches.push(wrap(ref, Object.freeze({ kind: 'condition', field, operator: operatorFor(field), value })))
    if (!source.list) break
  }
  if (matches.length === 0) throw new AppError(Errors.INVALID_FILTER, [(first as Failure).failure])
  return matches.length === 1 ? matches[0]! : Object.freeze({ kind: 'or', children: Object.freeze(matches) })
}

function wrap(ref: FieldRef, condition: ResolvedCondition): ResolvedCondition | RelatedCondition {
  return ref.end === null ? condition : Object.freeze({ kind: 'related', end: ref.end, condition })
}

interface ValueContext {
  readonly ref: FieldRef
  readonly source: Source
  readonly metamodel: Metamodel
}

function resolveValue(field: ResolvedField, operator: Operator, raw: unknown, ctx: ValueContext): ResolvedValue | Failure {
  switch (operator) {
    case 'is_empty': case 'is_not_empty':
      return raw === undefined || raw === null ? NONE : failure(ctx.source.locate('value'), `${operator} takes no value`)
    case 'in': case 'not_in':
      return resolveList(field, operator, raw, ctx)
    default:
      return resolveScalar(field, operator, raw, ctx)
  }
}

const NONE: ResolvedValue = Object.freeze({ kind: 'none' })
const TEXT_MATCH: readonly Operator[] = ['contains', 'not_contains', 'starts_with']

function resolveScalar(field: ResolvedField, operator: Operator, raw: unknown, ctx: ValueContext): ResolvedValue | Failure {
  const at = ctx.source.locate('value')
  if (raw === undefined) return failure(at, `${operator} needs a value`)
  if (raw === null) return failure(at, `${operator} needs a value; use is_empty or is_not_empty to find empty values`)
  if (field.kind === 'column' && field.assetRef && typeof raw === 'string' && !isUuid(raw)) return assetRef(raw, ctx)
  const checked = wholeIfInteger(field, ctx.source.list ? fromString(field.type, String(raw)) : fromJson(field.type, raw))
  if (isMismatch(checked)) return failure(at, `${ctx.ref.name} ${checked.mismatch}`)
  // An empty pattern would match every non-empty value: surely not what was meant.
  if (TEXT_MATCH.includes(operator) && checked === '') return failure(at, `${operator} needs a non-empty string`)
  return Object.freeze({ kind: 'scalar', value: checked })
}

function resolveList(field: ResolvedField, operator: Operator, raw: unknown, ctx: ValueContext): ResolvedValue | Failure {
  // An empty list is a list ("an array of values"): `in []` matches nothing, `not_in []` everything, as an empty `or` and `and` do.
  if (!Array.isArray(raw)) {
    return failure(ctx.source.locate('value'), `${operator} needs an array of values, got ${describeValue(raw)}`)
  }
  if (field.kind === 'column' && field.assetRef && raw.some((item) => typeof item === 'string' && !isUuid(item))) return assetRefList(raw, ctx)
  const values: Scalar[] = []
  for (const [i, item] of raw.entries()) {
    const checked = wholeIfInteger(field, fromJson(field.type, item))
    if (isMismatch(checked)) return failure(ctx.source.locate('value', i), `${ctx.ref.name} ${checked.mismatch}`)
    values.push(checked)
  }
  return Object.freeze({ kind: 'list', values: Object.freeze(values) })
}

/** A property of whole numbers (integer, score) takes whole numbers: 1.5 is a value of the wrong type (CONTRACT §4). */
function wholeIfInteger(field: ResolvedField, checked: Checked): Checked {
  if (field.kind !== 'property' || field.integer !== true || typeof checked !== 'number' || Number.isInteger(checked)) return checked
  return { mismatch: `needs an integer, got ${checked}` }
}

function assetRef(raw: string, ctx: ValueContext): ResolvedValue | Failure {
  const key = parseAssetRef(raw, ctx.metamodel)
  if (key === null || 'id' in key) {
    return failure(ctx.source.locate('value'),
      `${ctx.ref.name} needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got ${describeValue(raw)}`)
  }
  return Object.freeze({ kind: 'asset_ref', asset_type_key: key.asset_type_key, unique_value: key.unique_value })
}

/** UUIDs and composite keys mixed in one `in` list: the ids as they are, the keys looked up in SQL. */
function assetRefList(raw: readonly unknown[], ctx: ValueContext): ResolvedValue | Failure {
  const ids: string[] = []
  const keys: AssetCompositeKey[] = []
  for (const [i, item] of raw.entries()) {
    const key = typeof item === 'string' ? parseAssetRef(item, ctx.metamodel) : null
    if (key === null) {
      return failure(ctx.source.locate('value', i),
        `${ctx.ref.name} needs a UUID or a composite key {asset_type_key}:{unique_property_key}:{value}, got ${describeValue(item)}`)
    }
    if ('id' in key) ids.push(key.id)
    else keys.push(Object.freeze({ asset_type_key: key.asset_type_key, unique_value: key.unique_value }))
  }
  return Object.freeze({ kind: 'asset_refs', ids: Object.freeze(ids), keys: Object.freeze(keys) })
}

function unknownFieldDetail(name: string, target: Target): string {
  const inner = name.replace(/^(source_asset|target_asset)\./, '')
  if (inner.startsWith(PROPERTY_PREFIX) && (target === 'assets' || inner !== name)) {
    return `unknown property ${describeValue(inner.slice(PROPERTY_PREFIX.length))}: no asset type in the metamodel defines it`
  }
  return `unknown field ${describeValue(name)}; ${target} are filtered by ${filterFieldsText(target)}`
}

function unfitOperatorDetail(operator: Operator, ref: FieldRef): string {
  const accepted = [...new Set(ref.candidates.flatMap((field) => OPERATORS_BY_TYPE[field.type]))]
  return `${operator} does not fit ${describeField(ref)}; it takes ${accepted.join(', ')}`
}

function failure(at: Pick<Issue, 'pointer' | 'parameter'>, detail: string): Failure {
  return { failure: { detail, ...at } }
}

export function failFilter(at: Pick<Issue, 'pointer' | 'parameter'>, detail: string): never {
  throw new AppError(Errors.INVALID_FILTER, [{ detail, ...at }])
}
