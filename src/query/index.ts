/**
 * The filter and sort compiler: parse → resolve → compile (see README.md). Import from here or
 * from the stage modules.
 */
export { OPERATORS, type Operator, type FilterNode, type GroupNode, type ConditionNode } from './ast.js'
export { MAX_FILTER_CONDITIONS, MAX_FILTER_DEPTH } from './limits.js'
export { parseFilter } from './parse.js'
export { parseListFilters, resolveListFilters } from './list.js'
export {
  MATCH_ALL, andNodes, resolveFilter, sqlNode,
  type ResolvedNode, type ResolvedCondition, type ResolvedValue, type SqlFragment,
} from './resolve.js'
export { OPERATORS_BY_TYPE, type FieldType, type ResolvedField, type Target } from './fields.js'
export { JSONB_STORAGE, columnExpr, compileFilter, propertyContains, propertyExpr, type PropertyStorage } from './compile.js'
export { compileOrderBy, parseSortBody, parseSortParam, type SortSpec } from './sort.js'
