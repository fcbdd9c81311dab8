import type { Queryable, QueryOptions, StoreKind } from './db.js'

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

/**
 * The organization `$1` as a row `o` whose `org_id` the planner cannot read as a constant (the
 * `OFFSET 0` keeps the subquery from being pulled up), for joins of many rows by key:
 * `JOIN assets b ON b.org_id = o.org_id AND b.id = u.id` can only be planned as a lookup by the
 * whole primary key. With `b.org_id = $1` instead, statistics taken while the organization was
 * small (a new organization, a bulk load before the next ANALYZE) make the planner scan all of
 * the organization's rows for each joined row: 10,000 × 160,000 comparisons, minutes for one
 * bulk PATCH (seen in the benchmark).
 */
export const ORG_ROW = '(SELECT $1::uuid AS org_id OFFSET 0) o'

/** `2026-01-31T09:15:00Z` written by the store (core/time.ts isoSecond's twin in SQL, CONTRACT §1). */
export const isoSecondSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`

/** The rows of a record read (columns `created_at`, `updated_at`) as one JSON document (QueryOptions.jsonRows). */
export const RECORD_JSON_ROWS = { timestamps: ['created_at', 'updated_at'] } as const

/**
 * How a page read (selectPage) hands over its records: as rows (`columns`; the process builds the
 * records) or, for the API without includes, as each record's JSON text written by the store
 * (`recordJson`, selected as `doc`; decision 0017).
 */
export function pageReads(columns: string, recordJson: string) {
  return {
    rows: { select: columns, jsonRows: RECORD_JSON_ROWS },
    json: { select: `${recordJson} AS doc`, docRows: true },
  } as const
}

/**
 * The most rows one write statement takes on PGlite. PostgreSQL runs a statement in its own
 * process, PGlite in the server's: its WebAssembly memory grows to what the largest statement
 * needed and never shrinks. A 10,000-row bulk insert in one statement grew it from 128 to 154 MB;
 * in slices of 5,000 or fewer it did not grow (decision 0015, addendum 2026-11-27).
 */
export const PGLITE_STATEMENT_ROWS = 2_500

/** By id: ids are UUIDv7 made in item order, so rows (and the events made for them) follow their items. */
export function inIdOrder<T extends { id: string }>(rows: readonly T[]): T[] {
  return [...rows].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/**
 * Runs one write statement over `rows` (`write`: the statement for some of them, answering one
 * row per row written, with its id): once on PostgreSQL, on PGlite in slices of
 * {@link PGLITE_STATEMENT_ROWS} in the caller's transaction. The slices are taken in id order,
 * the order in which one statement gives its events their ids and, on PGlite, their positions
 * (outbox/write.ts eventIdsByRow): the events of the slices follow one another as those of one
 * statement would. PGlite runs one transaction at a time, so the global orders that keep
 * concurrent PostgreSQL writers from deadlocking (a statement's own ORDER BY) are not needed
 * across slices. The answers come back in the order of `rows`.
 */
export async function inStatementSlices<T extends { id: string }, R extends { id: string }>(
  db: { readonly kind: StoreKind },
  rows: readonly T[],
  write: (slice: readonly T[]) => Promise<R[]>,
): Promise<R[]> {
  if (db.kind !== 'pglite' || rows.length <= PGLITE_STATEMENT_ROWS) return write(rows)
  const ordered = inIdOrder(rows)
  const answers = new Map<string, R>()
  for (let at = 0; at < ordered.length; at += PGLITE_STATEMENT_ROWS) {
    for (const answer of await write(ordered.slice(at, at + PGLITE_STATEMENT_ROWS))) answers.set(answer.id, answer)
  }
  return rows.flatMap((row) => answers.get(row.id) ?? [])
}

/** What a multi-row insert whose rows' ids the caller made tells it: the rows it skipped, and the timestamps it gave. */
export interface InsertOutcome {
  /** `date_trunc('second', now())`: the created_at and updated_at of every row written. */
  at: Date | string
  /** The ids of the rows the conflict skipped (usually none). */
  skipped: string[] | null
}

/**
 * The answer of an `INSERT … ON CONFLICT DO NOTHING` over the rows of CTE `u` (column `id`) whose
 * RETURNING is CTE `ins`: one row, the ids that were NOT written and the statement's timestamp.
 * The caller made every id and knows every row, so 10,000 written rows cost no answer rows at all
 * (each returned row was parsed, and its timestamp too: ~40 ms of a 10,000-item bulk).
 */
export const INSERT_OUTCOME = `SELECT date_trunc('second', now()) AS at,
            ARRAY(SELECT u.id FROM u WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = u.id)) AS skipped`

export function insertOutcome(row: InsertOutcome): { at: Date | string; skipped: Set<string> } {
  return { at: row.at, skipped: new Set(row.skipped ?? []) }
}

/** Escapes LIKE/ILIKE wildcards so user text matches literally (with `ESCAPE '\'`). */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`)
}

/** A page's count: `total` is capped at {@link COUNT_CAP} unless `exact`; `more` says items follow the page. */
export interface Counted {
  total: number
  exact: boolean
  more: boolean
}

/**
 * Counts stop here (CONTRACT §1): past it a count would read every match, which costs more than the
 * page itself at a million assets. The caller asks for the exact figure when it needs it.
 */
export const COUNT_CAP = 10_000

/**
 * The count rule of CONTRACT §1 applied to a figure known exactly: past {@link COUNT_CAP} it is
 * reported as the cap unless the page asked for the exact count.
 */
export function capCount(page: { count?: 'exact' }, n: number, more: boolean): Counted {
  return n > COUNT_CAP && page.count !== 'exact' ? { total: COUNT_CAP, exact: false, more } : { total: n, exact: true, more }
}

/** Conditions, order and page of a list or search; `params` holds the values `where` and `orderBy` use. */
export interface PageQuery {
  where: string
  orderBy: string
  limit: number
  offset: number
  params: Params
}

/** Results one request may read and remember (kept by counts/cache.ts), by statement and parameters. */
export interface ResultMemo<T> {
  read(statement: string): Promise<T | undefined>
  /** `weight`: the rows the result holds (1 for a count). */
  write(statement: string, value: T, weight?: number): void
  /**
   * When results are answered by the store's data version (PostgreSQL): the version as a scalar
   * subquery (`sql`, the organization `orgId` bound to the placeholder given), which a statement
   * the request runs anyway may select and hand over (`heard`) before the first read, instead of
   * the memo asking with a statement of its own. Read in the same statement as a page, or before
   * its count: a result is never older than the version it is remembered for.
   */
  readonly version?: { readonly orgId: string; sql(org: string): string; heard(version: string | null): void }
}

/** Counts one request may read and remember. */
export type CountMemo = ResultMemo<number>

/** How a page is counted (CONTRACT §1), besides the cap that always applies. */
export interface CountOptions {
  /** `page[count]=exact`: count every match, however many. */
  exact?: boolean
  /**
   * An O(1) count of every row `where` matches (the live asset counters), given by a caller that
   * knows its conditions are org, liveness and asset type only: a scalar subquery whose values
   * it adds to `params`.
   */
  live?: (params: Params) => string
  /** Counts of this organization's current data generation (counts/cache.ts): a count taken before is not taken again. */
  memo?: CountMemo | undefined
}

export interface PageRows<R> extends Counted {
  rows: R[]
}

/** A row read as JSON text the store wrote (`… AS doc`, QueryOptions.docRows): a record passed on as it is. */
export interface DocRow {
  doc: string
}

/** Rows skipped from which a page is read by a deferred join (below it, in one pass). */
export const DEFERRED_JOIN_FROM_OFFSET = 1_000

/**
 * One page of rows and its count (CONTRACT §1).
 *
 * The page: with `source.key` (the alias whose `org_id, id` name a row) and at least
 * DEFERRED_JOIN_FROM_OFFSET rows to skip, a deferred join: the
 * conditions, order, OFFSET and LIMIT run over `countFrom ?? from` selecting keys only, which an
 * index serves without touching the rows it skips; only the page's keys are joined back to `from`
 * for their columns. One row past the page is read, so `more` is known without a count.
 * `source.jsonRows`: the page's rows may travel as one JSON document (QueryOptions.jsonRows).
 *
 * The count, only when the page cannot tell it (a full page, or a page past the end): the
 * live counters when the caller gives them, else `count(*)` over at most COUNT_CAP + 1 matches,
 * or over all of them when the exact figure was asked for. A count the request's memo remembers
 * is not taken again. On PostgreSQL, what the count needs is selected with the page's rows (one
 * round trip, the same snapshot): the live counters themselves, exact every time and cheaper than
 * a remembered figure's check, or the data version a remembered count is answered for. Page and
 * count run as prepared statements on PostgreSQL, parsed once per connection (decision 0021).
 *
 * @example selectPage(db, {select: 'a.id, a.name', from: 'assets a', key: 'a'}, {where: 'a.org_id = $1', orderBy: 'a.id', limit: 50, offset: 0, params})
 *   // SELECT a.id, a.name FROM assets a JOIN (SELECT a.org_id AS k_org, a.id AS k_id FROM assets a
 *   //   WHERE a.org_id = $1 ORDER BY a.id LIMIT $2 OFFSET $3) k ON a.org_id = k.k_org AND a.id = k.k_id ORDER BY a.id
 *   // SELECT count(*)::int AS n FROM (SELECT 1 FROM assets a WHERE a.org_id = $1 LIMIT 10001) c
 */
export async function selectPage<R>(
  db: Queryable,
  source: { select: string | ((params: Params) => string); from: string; countFrom?: string; key?: string; jsonRows?: QueryOptions['jsonRows']; docRows?: boolean },
  q: PageQuery,
  count: CountOptions = {},
): Promise<PageRows<R>> {
  const pageParams = new Params(q.params.values)
  // Values only the selected columns use are the page's own: the count binds only `q.params`.
  const columns = typeof source.select === 'string' ? source.select : source.select(pageParams)
  const limit = pageParams.add(q.limit + 1)
  const offset = pageParams.add(q.offset)
  // Near the start the rows skipped are few: reading them whole costs less than a second pass
  // over the page's keys (decision 0011: page 1 paid 100 primary-key probes more than the limit).
  const deferred = source.key !== undefined && q.offset >= DEFERRED_JOIN_FROM_OFFSET
  // PostgreSQL: the live counters, or the data version the count's memo needs (ResultMemo.version),
  // are read with the page, one round trip less. PGlite answers a remembered count with no statement.
  const live = db.kind === 'postgres' ? count.live : undefined
  const version = live === undefined ? count.memo?.version : undefined
  const select = live !== undefined ? `${columns}, (${live(pageParams)}) AS kbis_live`
    : version !== undefined ? `${columns}, (${version.sql(pageParams.add(version.orgId))}) AS kbis_version`
    : columns
  const text = !deferred
    ? `SELECT ${select} FROM ${source.from} WHERE ${q.where} ORDER BY ${q.orderBy} LIMIT ${limit} OFFSET ${offset}`
    : `SELECT ${select} FROM ${source.from}
       JOIN (SELECT ${source.key}.org_id AS k_org, ${source.key}.id AS k_id FROM ${source.countFrom ?? source.from}
             WHERE ${q.where} ORDER BY ${q.orderBy} LIMIT ${limit} OFFSET ${offset}) k
         ON ${source.key}.org_id = k.k_org AND ${source.key}.id = k.k_id
       ORDER BY ${q.orderBy}`
  const read = (await db.query<R>(text, pageParams.values, { jsonRows: source.jsonRows, docRows: source.docRows, prepare: true })).rows
  if (version !== undefined && read.length > 0) version.heard((read[0] as { kbis_version?: string | null }).kbis_version ?? null)
  const more = read.length > q.limit
  const rows = more ? read.slice(0, q.limit) : read
  const page = { number: 1, size: q.limit, ...(count.exact === true ? { count: 'exact' as const } : {}) }
  // A short page says the total by itself (an empty one only on page 1: past the end it says
  // nothing). A full page is counted even when it is the last, so that the statements a list
  // issues do not depend on how many rows it finds (test/http/include.test.ts guards that).
  if (!more && rows.length < q.limit && (rows.length > 0 || q.offset === 0)) return { rows, ...capCount(page, q.offset + rows.length, false) }
  if (live !== undefined) {
    const n = read.length > 0 ? (read[0] as { kbis_live: number }).kbis_live : await liveCount(db, live)
    return { rows, ...capCount(page, n, more) }
  }
  const from = source.countFrom ?? source.from
  const cap = count.exact === true ? '' : ` LIMIT ${COUNT_CAP + 1}`
  const countSql = `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${from} WHERE ${q.where}${cap}) c`
  // Remembered by what is counted: the live counters' answer for these conditions, or the statement.
  const statement = count.memo === undefined ? '' : `${count.live !== undefined ? `live counters: ${q.where}` : countSql}\n${JSON.stringify(q.params.values)}`
  let n = await count.memo?.read(statement)
  if (n === undefined) {
    n = count.live !== undefined ? await liveCount(db, count.live) : (await db.query<{ n: number }>(countSql, q.params.values, { prepare: true })).rows[0]?.n ?? 0
    count.memo?.write(statement, n)
  }
  return { rows, ...capCount(page, n, more) }
}

/** CountOptions.live as a statement of its own. */
async function liveCount(db: Queryable, live: NonNullable<CountOptions['live']>): Promise<number> {
  const params = new Params()
  return (await db.query<{ n: number }>(`SELECT (${live(params)}) AS n`, params.values)).rows[0]?.n ?? 0
}
