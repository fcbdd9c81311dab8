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
 * PGlite has no autovacuum either, so there the keeper runs VACUUM ANALYZE: without it the dead
 * versions that updates leave (and every event row, rewritten once by the relay's stamp) are
 * never reclaimed, and no page is ever marked all-visible, so an index-only scan still reads the
 * table (a page 1000 of a list: 50 → 17 ms at 200,000 assets; VACUUM ANALYZE of that database
 * ≈ 1.2 s where ANALYZE alone takes ≈ 0.7 s). On PostgreSQL vacuuming is autovacuum's work.
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

/** The columns of `assets` the keeper analyzes on PostgreSQL. */
const ANALYZED_ASSET_COLUMNS = ['org_id', 'id', 'asset_type_key', 'name', 'access_domain_key', 'unique_value', 'archived_at', 'created_at', 'updated_at']

export class StatisticsKeeper {
  private written = 0
  /** Rows of `assets` at the last ANALYZE (the planner's own figure). */
  private tableRows = 0
  private readonly orgs = new Set<string>()
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> = Promise.resolve()
  private readonly schedule: NodeJS.Timeout

  constructor(private readonly db: Db, private readonly onError: (err: unknown) => void = () => undefined) {
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
      await this.analyzeTables(orgs).catch(this.onError)
      const rows = await this.db.query<{ n: number }>(`${BACKGROUND_SQL}SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = 'assets'::regclass`).catch(() => null)
      this.tableRows = Number(rows?.rows[0]?.n ?? 0)
    })
    return this.running
  }

  private async analyzeTables(orgs: readonly string[]): Promise<void> {
    // PGlite: the whole database, which is this service's alone; ANALYZE samples a bounded
    // number of rows per table whatever its size, VACUUM visits the pages changed since the last.
    if (this.db.kind === 'pglite') {
      await this.db.query('VACUUM ANALYZE')
      return
    }
    const projections = orgs.length === 0
      ? []
      : (await this.db.query<{ table_name: string }>(`${BACKGROUND_SQL}SELECT table_name FROM asset_projections WHERE org_id = ANY($1::uuid[])`, [orgs])).rows
    // `assets` without its documents: the planner's choices here rest on the organization, type,
    // liveness and order columns, and sampling the jsonb documents is most of an ANALYZE's cost.
    // (Autovacuum, when on, still analyzes every column.) The projections hold the typed values
    // that search selectivity rests on: whole.
    await this.db.query(`${BACKGROUND_SQL}ANALYZE assets (${ANALYZED_ASSET_COLUMNS.join(', ')}), relationships${projections.map((p) => `, ${ident(p.table_name)}`).join('')}`)
  }

  async close(): Promise<void> {
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
export function registerStatistics(app: FastifyInstance, db: Db): StatisticsKeeper {
  const keeper = new StatisticsKeeper(db, (err) => app.log.warn({ err }, 'ANALYZE failed'))
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
