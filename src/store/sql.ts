import type { Queryable } from './db.js'

/**
 * Positional parameters for one SQL statement. Values enter SQL only through `add`, which returns
 * the `$n` placeholder; identifiers never pass through here.
 */
export class Params {
  readonly values: unknown[] = []

  constructor(initial: readonly unknown[] = []) {
    this.values.push(...initial)
  }

  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
}

/** Quotes an identifier. Callers pass only names checked against a whitelist or the metamodel. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/**
 * A string literal for SQL text, for metamodel keys (already matching ^[a-z][a-z0-9_]*$) used in
 * `properties->>'key'`: inlined rather than parameterized so expression indexes on
 * `properties->>'key'` still match the query.
 */
export function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`
}

/** Escapes LIKE/ILIKE wildcards so user text matches literally (with `ESCAPE '\'`). */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`)
}

/** Conditions, order and page of a list or search; `params` holds the values `where` and `orderBy` use. */
export interface PageQuery {
  where: string
  orderBy: string
  limit: number
  offset: number
  params: Params
}

/**
 * One page of rows and the total, as two statements run side by side: the page with ORDER BY,
 * LIMIT and OFFSET, the count over the same conditions without them. `from` is what the
 * conditions read (a table with its alias, or a join); `countFrom`, when set, is a narrower
 * source enough for counting (the search counts over its projection alone).
 *
 * @example selectPage(db, {select: 'a.id, a.name', from: 'assets a'}, {where: 'a.org_id = $1', orderBy: 'a.id', limit: 50, offset: 0, params})
 *   // SELECT a.id, a.name FROM assets a WHERE a.org_id = $1 ORDER BY a.id LIMIT $2 OFFSET $3
 *   // SELECT count(*)::int AS n FROM assets a WHERE a.org_id = $1
 */
export async function selectPage<R>(
  db: Queryable,
  source: { select: string; from: string; countFrom?: string },
  q: PageQuery,
): Promise<{ rows: R[]; total: number }> {
  const pageParams = new Params(q.params.values)
  const limit = pageParams.add(q.limit)
  const offset = pageParams.add(q.offset)
  const [rows, count] = await Promise.all([
    db.query<R>(`SELECT ${source.select} FROM ${source.from} WHERE ${q.where} ORDER BY ${q.orderBy} LIMIT ${limit} OFFSET ${offset}`, pageParams.values),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${source.countFrom ?? source.from} WHERE ${q.where}`, q.params.values),
  ])
  return { rows: rows.rows, total: count.rows[0]?.n ?? 0 }
}
