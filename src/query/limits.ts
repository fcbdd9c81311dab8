/**
 * Limits of the filter language (CONTRACT §4). They bound the work one request can ask of the
 * parser (recursion depth) and of the database (size of the WHERE clause), in the spirit of
 * PocketBase's filter limits. The request body size limit bounds everything else.
 */

/** Group levels (`and`/`or` objects) on the path from the root to the deepest node. */
export const MAX_FILTER_DEPTH = 10

/** Conditions in one filter, counted over the whole tree (list filters count too). */
export const MAX_FILTER_CONDITIONS = 500

/**
 * The total size of a filter's operands: each string value counts its characters, each list its
 * items, any other value 1. It bounds what the conditions cost the database (a `contains` scans
 * every row with its pattern), where the condition count alone let 500 conditions with long
 * patterns tie a connection up for seconds.
 */
export const MAX_FILTER_OPERAND_SIZE = 10_000
