/**
 * Limits of the filter language (CONTRACT §4). They bound the work one request can ask of the
 * parser (recursion depth) and of the database (size of the WHERE clause), in the spirit of
 * PocketBase's filter limits. The request body size limit bounds everything else.
 */

/** Group levels (`and`/`or` objects) on the path from the root to the deepest node. */
export const MAX_FILTER_DEPTH = 10

/** Conditions in one filter, counted over the whole tree (list filters count too). */
export const MAX_FILTER_CONDITIONS = 500
