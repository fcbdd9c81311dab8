import type { FastifyInstance } from 'fastify'
import { BACKGROUND_SQL, type Db } from './db.js'
import { ident } from './sql.js'

/**
 * Planner statistics kept fresh by the service itself (docs/decisions/0002-pglite-statistics.md).
 *
 * PGlite has no background processes: without this the planner never learns that `assets` holds
 * 200,000 rows and scans and sorts all of them where an index gives the page in milliseconds.
 * PostgreSQL's autovacuum analyzes tables as they change — when it runs: it can be switched off
 * (it is on this project's CI machines), and it waits for 10 % of a table to change and for its
 * next round (a minute). Meanwhile an organization that has just grown from nothing to 100,000
 * assets is still "empty" to the planner. So on both stores the keeper runs ANALYZE after large
 * writes (1,000 rows and 10 % of the table since the last one): on PostgreSQL at most
 * {@link ANALYZE_DEBOUNCE_MS} after the write that crossed the threshold (a series of bulk
 * requests pays for one ANALYZE every few seconds at most, not one each); on PGlite, whose only
 * thread ANALYZE holds, that long after the last write of a series; and on a
 * schedule while writes keep coming. PGlite analyzes its whole database; PostgreSQL, whose
 * database may hold other schemas, the service's written tables: `assets`, `relationships` and
 * the typed projections of the organizations written to.
 *
 * PGlite has no autovacuum either, so there the keeper vacuums too: without it the dead versions
 * that updates leave are never reclaimed, and no page is ever marked all-visible, so an index-only
 * scan still reads the table (a page 1000 of a list: 50 → 17 ms at 200,000 assets). It does what
 * autovacuum would, table by table, one statement each (pgliteUpkeep), so that the requests
 * queued on PGlite's one thread run between them. On PostgreSQL vacuuming is autovacuum's work.
 */

/** Rows written since the last ANALYZE that make the next one worth its cost (at least). */
export const ANALYZE_AFTER_ROWS = 1_000
/**
 * …and at least this share of the table as it was at the last ANALYZE (autovacuum's own default):
 * a table of a million rows is analyzed after 100,000 written, not after every bulk request.
 */
export const ANALYZE_SCALE_FACTOR = 0.1
/** At most this long after the write that crossed the threshold, ANALYZE runs (throttled, not postponed by later writes). */
export const ANALYZE_DEBOUNCE_MS = 2_000
/** The schedule: any write at all since the last ANALYZE gets one within this period. */
export const ANALYZE_EVERY_MS = 10 * 60_000

/** PGlite: the pause between two statements of the keeper's upkeep, for the requests waiting (pgliteUpkeep). */
export const UPKEEP_PAUSE_MS = 20

/** The columns of `assets` the keeper analyzes on PostgreSQL. */
const ANALYZED_ASSET_COLUMNS = ['org_id', 'id', 'asset_type_key', 'name', 'access_domain_key', 'unique_value', 'archived_at', 'created_at', 'updated_at']

/**
 * The tables of the service's schema that need upkeep (PGlite): `vacuum` when rows were written
 * or left dead since their last VACUUM; `changed`, the rows changed since their last ANALYZE of
 * every column; `columns`, a table's columns but its jsonb documents when it has any (null: all).
 */
const UPKEEP_TABLES = `${BACKGROUND_SQL}SELECT format('%I.%I', s.schemaname, s.relname) AS name,
    s.n_dead_tup > 0 OR s.n_ins_since_vacuum > 0 AS vacuum, s.n_mod_since_analyze::float8 AS changed,
    (SELECT string_agg(format('%I', a.attname), ', ' ORDER BY a.attnum) FILTER (WHERE a.atttypid <> 'jsonb'::regtype)
       FROM pg_attribute a WHERE a.attrelid = s.relid AND a.attnum > 0 AND NOT a.attisdropped
       HAVING bool_or(a.atttypid = 'jsonb'::regtype)) AS columns
  FROM pg_stat_user_tables s
  WHERE s.schemaname = current_schema() AND (s.n_dead_tup > 0 OR s.n_ins_since_vacuum > 0 OR s.n_mod_since_analyze > 0)
  ORDER BY s.relname`

export type UpkeepKind = 'vacuum' | 'analyze'

export interface UpkeepHooks {
  /** An upkeep that failed (it is tried again after the next writes). */
  onError?: (err: unknown) => void
  /** Each statement of the upkeep, done: its kind and how long it took (the metrics). */
  onStatement?: (kind: UpkeepKind, seconds: number) => void
}

export class StatisticsKeeper {
  private written = 0
  /** Rows of `assets` at the last ANALYZE (the planner's own figure). */
  private tableRows = 0
  private readonly orgs = new Set<string>()
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> = Promise.resolve()
  private closing = false
  /** PGlite: per table analyzed without its documents, its count of changes as that ANALYZE left it. */
  private readonly analyzedAt = new Map<string, number>()
  private readonly schedule: NodeJS.Timeout

  constructor(private readonly db: Db, private readonly hooks: UpkeepHooks = {}) {
    this.schedule = setInterval(() => { if (this.written > 0) this.analyzeSoon(0) }, ANALYZE_EVERY_MS)
    this.schedule.unref()
  }

  /** Records `rows` written in an organization; a total past {@link ANALYZE_AFTER_ROWS} schedules an ANALYZE. */
  wrote(rows: number, orgId?: string): void {
    this.written += rows
    if (orgId !== undefined) this.orgs.add(orgId)
    if (this.written >= Math.max(ANALYZE_AFTER_ROWS, ANALYZE_SCALE_FACTOR * this.tableRows)) this.analyzeSoon(ANALYZE_DEBOUNCE_MS)
  }

  private analyzeSoon(delay: number): void {
    // PostgreSQL: already due, a later write does not push it back (statistics stay at most this
    // stale; ANALYZE runs beside the requests). PGlite: ANALYZE holds the server's only thread, so
    // a series of bulk requests is not interrupted: each write pushes it back until a quiet moment.
    if (this.timer !== null && delay > 0 && this.db.kind === 'postgres') return
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = setTimeout(() => { this.timer = null; void this.analyze() }, delay)
    this.timer.unref()
  }

  /** Runs ANALYZE now (after any run in progress); resolves when it is done. */
  analyze(): Promise<void> {
    this.running = this.running.then(async () => {
      this.written = 0
      const orgs = [...this.orgs]
      this.orgs.clear()
      await this.analyzeTables(orgs).catch((err: unknown) => this.hooks.onError?.(err))
      const rows = await this.db.query<{ n: number }>(`${BACKGROUND_SQL}SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = 'assets'::regclass`).catch(() => null)
      this.tableRows = Number(rows?.rows[0]?.n ?? 0)
    })
    return this.running
  }

  private async analyzeTables(orgs: readonly string[]): Promise<void> {
    if (this.db.kind === 'pglite') return this.pgliteUpkeep()
    const projections = orgs.length === 0
      ? []
      : (await this.db.query<{ table_name: string }>(`${BACKGROUND_SQL}SELECT table_name FROM asset_projections WHERE org_id = ANY($1::uuid[])`, [orgs])).rows
    // `assets` without its documents: the planner's choices here rest on the organization, type,
    // liveness and order columns, and sampling the jsonb documents is most of an ANALYZE's cost.
    // (Autovacuum, when on, still analyzes every column.) The projections hold the typed values
    // that search selectivity rests on: whole.
    await this.run('analyze', `ANALYZE assets (${ANALYZED_ASSET_COLUMNS.join(', ')}), relationships${projections.map((p) => `, ${ident(p.table_name)}`).join('')}`)
  }

  /** One statement of the upkeep, timed for `hooks.onStatement`. */
  private async run(kind: UpkeepKind, statement: string): Promise<void> {
    const started = performance.now()
    await this.db.query(`${BACKGROUND_SQL}${statement}`)
    this.hooks.onStatement?.(kind, (performance.now() - started) / 1000)
  }

  /**
   * PGlite (whose database is this service's alone): VACUUM of each table written since its last
   * VACUUM, then ANALYZE of each table changed since its last ANALYZE, every column but the JSON
   * documents (no plan rests on their statistics, and sampling them is most of an ANALYZE's cost:
   * 394 → 206 ms for `events` and `assets` at 200,000 assets). One statement per table, not one
   * `VACUUM ANALYZE` of the database, and {@link UPKEEP_PAUSE_MS} between two: PGlite runs one
   * statement at a time, in the order asked, and a request that arrives meanwhile waits for the
   * statement in progress; the pause lets it run its next statements too, instead of queueing
   * each behind the next table's. After two rounds of 20,000 servers created and patched, that
   * database-wide statement held the requests for 1.2 s at 200,000 assets and 2.4 s at
   * 1,000,000; the longest statement here, the VACUUM of `assets` (each of its indexes is read
   * once when dead rows are reclaimed), 0.3 s and 0.75 s (decision 0002). Closing stops it
   * between two statements.
   */
  private async pgliteUpkeep(): Promise<void> {
    // This backend's table counters reach pg_stat_user_tables at the end of a statement, at most
    // once a second: the flush is forced, so that the list sees the writes just made.
    await this.db.query(`${BACKGROUND_SQL}SELECT pg_stat_force_next_flush()`)
    const tables = (await this.db.query<{ name: string; vacuum: boolean; changed: number; columns: string | null }>(UPKEEP_TABLES)).rows
    // An ANALYZE of some columns leaves the table's count of changes as it was: the count it left
    // is remembered, and the table analyzed again once that count has moved.
    // (A count is remembered once its ANALYZE has run: a failed one is tried again next time.)
    const analyze = tables.filter((t) => t.changed !== (this.analyzedAt.get(t.name) ?? 0))
    const steps: { kind: UpkeepKind; statement: string; done?: () => void }[] = [
      ...tables.filter((t) => t.vacuum).map((t) => ({ kind: 'vacuum' as const, statement: `VACUUM ${t.name}` })),
      ...analyze.map((t) => ({
        kind: 'analyze' as const,
        statement: `ANALYZE ${t.name}${t.columns === null ? '' : ` (${t.columns})`}`,
        done: () => { if (t.columns !== null) this.analyzedAt.set(t.name, t.changed) },
      })),
    ]
    for (const [i, step] of steps.entries()) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, UPKEEP_PAUSE_MS))
      if (this.closing) return
      // A table dropped since the list (a projection, by a metamodel change) fails its own step only.
      await this.run(step.kind, step.statement).then(step.done, (err: unknown) => this.hooks.onError?.(err))
    }
  }

  async close(): Promise<void> {
    this.closing = true
    clearInterval(this.schedule)
    if (this.timer !== null) clearTimeout(this.timer)
    await this.running
  }
}

/**
 * Counts the items of successful bulk requests (by organization) and keeps statistics fresh with
 * a {@link StatisticsKeeper}. Single writes count one row each, so a steady trickle of writes is
 * analyzed too. Registered once on the root instance.
 */
export function registerStatistics(app: FastifyInstance, db: Db, onStatement?: UpkeepHooks['onStatement']): StatisticsKeeper {
  const keeper = new StatisticsKeeper(db, { onError: (err) => app.log.warn({ err }, 'statistics upkeep (ANALYZE, VACUUM) failed'), ...(onStatement ? { onStatement } : {}) })
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 300 || request.method === 'GET' || request.method === 'HEAD') return
    if (request.routeOptions.url?.includes('/search/') || request.routeOptions.url?.includes('/analytics/')) return
    // A dry run rolls back and a replayed answer writes nothing: neither changes the tables.
    if ((request.query as { dry_run?: unknown } | undefined)?.dry_run === true || reply.getHeader('idempotent-replayed') !== undefined) return
    keeper.wrote(Array.isArray(request.body) ? request.body.length : 1, (request.auth as { orgId?: string } | null)?.orgId)
  })
  app.addHook('onClose', async () => keeper.close())
  return keeper
}
