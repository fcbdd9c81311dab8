import type { FastifyInstance } from 'fastify'
import type { Db } from './db.js'

/**
 * Planner statistics on the embedded store (docs/decisions/0002-pglite-statistics.md).
 *
 * PostgreSQL's autovacuum daemon runs ANALYZE as tables change; PGlite has no background
 * processes, so without this the planner never learns that `assets` holds 200,000 rows and scans
 * and sorts all of them where an index gives the page in milliseconds. This keeper runs ANALYZE
 * on PGlite after large writes (debounced, so a run of bulk requests pays for one ANALYZE) and
 * on a schedule while writes keep coming. PostgreSQL keeps its own statistics: nothing is done.
 */

/** Rows written since the last ANALYZE that make the next one worth its cost. */
export const ANALYZE_AFTER_ROWS = 1_000
/** Quiet time after a large write before ANALYZE runs: a series of bulks runs one ANALYZE. */
export const ANALYZE_DEBOUNCE_MS = 2_000
/** The schedule: any write at all since the last ANALYZE gets one within this period. */
export const ANALYZE_EVERY_MS = 10 * 60_000

export class StatisticsKeeper {
  private written = 0
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> = Promise.resolve()
  private readonly schedule: NodeJS.Timeout

  constructor(private readonly db: Db, private readonly onError: (err: unknown) => void = () => undefined) {
    this.schedule = setInterval(() => { if (this.written > 0) this.analyzeSoon(0) }, ANALYZE_EVERY_MS)
    this.schedule.unref()
  }

  /** Records `rows` written; a total past {@link ANALYZE_AFTER_ROWS} schedules an ANALYZE. */
  wrote(rows: number): void {
    this.written += rows
    if (this.written >= ANALYZE_AFTER_ROWS) this.analyzeSoon(ANALYZE_DEBOUNCE_MS)
  }

  private analyzeSoon(delay: number): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = setTimeout(() => { this.timer = null; void this.analyze() }, delay)
    this.timer.unref()
  }

  /** Runs ANALYZE now (after any run in progress); resolves when it is done. */
  analyze(): Promise<void> {
    this.running = this.running.then(async () => {
      this.written = 0
      // The whole database: `assets`, `relationships` and every organization's typed projection
      // change together, and ANALYZE samples a bounded number of rows per table whatever its size.
      await this.db.query('ANALYZE').catch(this.onError)
    })
    return this.running
  }

  async close(): Promise<void> {
    clearInterval(this.schedule)
    if (this.timer !== null) clearTimeout(this.timer)
    await this.running
  }
}

/**
 * On PGlite: counts the items of successful bulk requests and keeps statistics fresh with a
 * {@link StatisticsKeeper}. Single writes count one row each, so a steady trickle of writes is
 * analyzed too. Registered once on the root instance.
 */
export function registerStatistics(app: FastifyInstance, db: Db): StatisticsKeeper | null {
  if (db.kind !== 'pglite') return null
  const keeper = new StatisticsKeeper(db, (err) => app.log.warn({ err }, 'ANALYZE failed'))
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 300 || request.method === 'GET' || request.method === 'HEAD') return
    if (request.routeOptions.url?.includes('/search/') || request.routeOptions.url?.includes('/analytics/')) return
    keeper.wrote(Array.isArray(request.body) ? request.body.length : 1)
  })
  app.addHook('onClose', async () => keeper.close())
  return keeper
}
