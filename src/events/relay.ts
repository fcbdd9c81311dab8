import { BACKGROUND_SQL, type Db, type Queryable } from '../store/db.js'
import { metrics } from '../ops/metrics.js'
import { EVENT_COLUMNS, toCloudEvent, type CloudEvent, type StampedEventRow } from '../outbox/cloud-event.js'
import { onEventsWritten, stampingOf, type Stamping } from '../outbox/write.js'

/** An event the relay has just stamped, with its organization. */
export interface StampedEvent {
  orgId: string
  orgKey: string
  event: CloudEvent
}

/**
 * Runs INSIDE the stamping transaction (webhooks queue their deliveries there: a crash loses
 * nothing), with the batch's events — whole only when something wants them (see `onStamped`;
 * otherwise none) — and the batch's organizations either way.
 */
export type StampedHook = (tx: Queryable, events: StampedEvent[], orgIds: readonly string[]) => Promise<void>
/** Runs after the stamping transaction committed (NATS publishes there), with what the stamped hooks had. */
export type CommittedHook = (events: StampedEvent[], orgIds: readonly string[]) => void | Promise<void>
/** Whether a stamped hook needs the events of these organizations whole (asked in the transaction, before the stamp). */
export type WantsEvents = (tx: Queryable, orgIds: readonly string[]) => Promise<boolean>

/** What one stamping transaction did: how many events it stamped, which (whole, when wanted), of which organizations. */
interface StampedBatch {
  count: number
  events: StampedEvent[]
  orgIds: string[]
  /** More events may be waiting beyond this batch. */
  more: boolean
}

/** Positions drawn so far (0 before the first). */
const LAST_DRAWN = 'SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM event_sequence'

export interface RelayOptions {
  /** How often the relay looks for unstamped events (ms); writes of this process also wake it. */
  intervalMs: number
  /** Events older than this many days are purged (0 = never). */
  retentionDays: number
  /** Stamped events are marked pending publication (a NATS sink is configured). */
  publishes: boolean
  /** Events stamped per transaction. */
  batchSize?: number
  /** How often retention runs (ms). */
  retentionIntervalMs?: number
  /** A failure of retention or of the last stamping at shutdown. */
  onError?: (err: unknown) => void
  /** A failed round of stamping, and when the next one runs (see RELAY_RETRY_FIRST_MS). */
  onRoundFailed?: (err: unknown, retry: RelayRetry) => void
}

export interface RelayRetry {
  /** Rounds failed in a row, this one included. */
  failures: number
  /** The previous round failed with the same message: the log can say so in a line, not repeat the stack. */
  repeated: boolean
  retryInMs: number
}

/**
 * After a failed round (the store unreachable) the relay waits before the next: 250 ms, doubling
 * to 5 s, as the LISTEN connection does (store/db.ts); a round that succeeds resets it. Polling
 * every `intervalMs` regardless put a failure in the log ten times a second.
 */
const RELAY_RETRY_FIRST_MS = 250
const RELAY_RETRY_MAX_MS = 5_000

/**
 * One advisory lock for the whole store: stamping transactions of every server process are
 * serialized by it, which is what makes `sequence` follow commit order (decision 0003).
 */
export const RELAY_LOCK = 727_160_009

/**
 * How long, on PGlite, a commit's hand-over waits for later commits to join its round. Single
 * creates in a row, in process: 180–250 → 408–490 a second with 20 ms (one round per 5–7
 * creates instead of one each); webhooks and NATS get the events that much later.
 */
export const HANDOVER_GATHER_MS = 20

/**
 * The event relay (docs/decisions/0003-event-feed-ordering.md). Writers insert events with
 * `sequence` NULL in their own transaction; the relay, alone under `RELAY_LOCK`, gives every
 * committed unstamped event the next positions, in `id` order (ids of one process sort in
 * creation order), in batches. A stamping transaction only sees committed rows and runs after
 * every earlier stamping transaction committed, so each position it gives is higher than every
 * position a reader could already see: `WHERE sequence > cursor` never skips a late committer.
 */
export class EventRelay {
  private readonly stampedHooks: { hook: StampedHook; wants: WantsEvents | null }[] = []
  private readonly committedHooks: CommittedHook[] = []
  private readonly stoppedHooks: (() => Promise<void>)[] = []
  private readonly retentionHooks: ((retentionDays: number) => Promise<void>)[] = []
  private timer: NodeJS.Timeout | null = null
  private retentionTimer: NodeJS.Timeout | null = null
  private chain: Promise<unknown> = Promise.resolve()
  private tickQueued = false
  /** The wake that this process's commits are waiting for (see wakeAfterCommit). */
  private due: NodeJS.Timeout | null = null
  private stopped = false
  private readonly batchSize: number
  private unlisten: (() => void) | null = null
  private unwatch: (() => void) | null = null
  /** Failed rounds in a row, the last one's message, and when rounds may run again. */
  private failures = 0
  private lastFailure = ''
  private retryAt = 0
  readonly stamping: Stamping

  constructor(private readonly db: Db, private readonly options: RelayOptions) {
    this.batchSize = options.batchSize ?? 5000
    this.stamping = stampingOf(db.kind)
  }

  /**
   * Sets the store up for its way of stamping (before start): on PGlite `sequence` defaults to the
   * next position, and events written without one (by a command before the first start, or by an
   * earlier version) get theirs now, in id order; on PostgreSQL `sequence` has no default (a
   * store copied from PGlite would otherwise draw positions out of commit order).
   */
  async prepare(): Promise<void> {
    const column = await this.db.query<{ expr: string | null }>(
      `SELECT pg_get_expr(d.adbin, d.adrelid) AS expr FROM pg_attribute a
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = 'events'::regclass AND a.attname = 'sequence'`)
    const hasDefault = (column.rows[0]?.expr ?? null) !== null
    if (this.stamping === 'stamp') {
      if (hasDefault) await this.db.query('ALTER TABLE events ALTER COLUMN sequence DROP DEFAULT')
      return
    }
    if (!hasDefault) await this.db.query("ALTER TABLE events ALTER COLUMN sequence SET DEFAULT nextval('event_sequence')")
    // The ORDER BY keeps the subquery apart: positions are drawn over rows already in id order.
    await this.db.query(`UPDATE events e SET sequence = s.n
       FROM (SELECT x.org_id, x.id, nextval('event_sequence') AS n FROM (SELECT org_id, id FROM events WHERE sequence IS NULL ORDER BY id) x) s
       WHERE e.org_id = s.org_id AND e.id = s.id`)
  }

  /**
   * `hook` runs in every stamping transaction. With `wants`, the relay first asks whether the hook
   * needs the batch's events whole; when neither it, another hook nor a NATS sink does, the stamp
   * returns ids only and the hooks get no events (returning and parsing every event's document
   * was about a third of a stamp on PGlite, whose one thread the next request waits for).
   */
  onStamped(hook: StampedHook, wants?: WantsEvents): void {
    this.stampedHooks.push({ hook, wants: wants ?? null })
  }

  onCommitted(hook: CommittedHook): void {
    this.committedHooks.push(hook)
  }

  /**
   * Runs with each retention round, after the events (the webhook delivery log is kept as long):
   * deletes what is older than `retentionDays`.
   */
  onRetention(hook: (retentionDays: number) => Promise<void>): void {
    this.retentionHooks.push(hook)
  }

  /** Runs after the relay's last stamping at shutdown (sinks close their connections there). */
  onStopped(hook: () => Promise<void>): void {
    this.stoppedHooks.push(hook)
  }

  start(): void {
    if (this.timer || this.stopped) return
    this.timer = setInterval(() => this.wake(), this.options.intervalMs)
    this.timer.unref()
    // Events this process commits wake it (wakeAfterCommit); other processes' events: the poll.
    this.unlisten = onEventsWritten(() => this.wakeAfterCommit())
    this.unwatch = metrics.watchEventsPending(() => this.pendingCount())
    if (this.options.retentionDays > 0) {
      const every = this.options.retentionIntervalMs ?? 3_600_000
      this.retentionTimer = setInterval(() => void this.serialize(() => this.purge()).catch((err) => this.options.onError?.(err)), every)
      this.retentionTimer.unref()
    }
  }

  /** Stops polling, then stamps and hands on what is left (graceful shutdown). */
  async stop(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    if (this.timer) clearInterval(this.timer)
    if (this.due) clearTimeout(this.due)
    this.unlisten?.()
    this.unwatch?.()
    if (this.retentionTimer) clearInterval(this.retentionTimer)
    this.timer = null
    this.retentionTimer = null
    await this.serialize(() => this.stampAll(true)).catch((err) => this.options.onError?.(err))
    for (const hook of this.stoppedHooks) await hook().catch((err) => this.options.onError?.(err))
  }

  /** Stamps soon, without waiting (a poll tick; a commit of this process, see wakeAfterCommit). */
  wake(): void {
    if (this.tickQueued || this.stopped || Date.now() < this.retryAt) return
    this.tickQueued = true
    void this.serialize(async () => {
      this.tickQueued = false
      if (await this.hasUnstamped()) await this.stampAll(false)
    }).then(() => {
      this.failures = 0
      this.lastFailure = ''
    }, (err: unknown) => this.roundFailed(err))
  }

  private roundFailed(err: unknown): void {
    this.failures++
    const retryInMs = Math.min(RELAY_RETRY_MAX_MS, RELAY_RETRY_FIRST_MS * 2 ** (this.failures - 1))
    this.retryAt = Date.now() + retryInMs
    const message = String((err as Error | undefined)?.message ?? err)
    const repeated = message === this.lastFailure
    this.lastFailure = message
    this.options.onRoundFailed?.(err, { failures: this.failures, repeated, retryInMs })
  }

  /**
   * A commit of this process wrote events: wake on a later turn of the event loop, once the
   * request that committed has sent its answer; on PGlite {@link HANDOVER_GATHER_MS} later, and
   * every commit meanwhile joins that round (a round is about ten statements on the one thread
   * the requests wait for, as many as a single create).
   */
  private wakeAfterCommit(): void {
    if (this.due || this.stopped) return
    this.due = setTimeout(() => {
      this.due = null
      this.wake()
    }, this.stamping === 'written' ? HANDOVER_GATHER_MS : 0)
    this.due.unref()
  }

  /**
   * Stamps every event committed so far, waiting for the lock if another process holds it, and
   * runs the hooks; when it resolves, a feed read sees every event committed before the call.
   */
  async flush(): Promise<void> {
    // A wake still due after a commit has nothing left to do after this round.
    if (this.due) {
      clearTimeout(this.due)
      this.due = null
    }
    await this.serialize(async () => {
      if (await this.hasUnstamped()) await this.stampAll(true)
    })
  }

  /**
   * Resolves when a feed read sees every event this process committed so far: on PostgreSQL once
   * they are stamped (a flush); on PGlite at once, since events have their positions from commit.
   */
  async feedReady(): Promise<void> {
    if (this.stamping === 'stamp') await this.flush()
  }

  /** Runs retention now (tests; otherwise hourly). */
  async purgeNow(): Promise<number> {
    return this.serialize(() => this.purge(true))
  }

  /** Unstamped (on PGlite: not yet handed over) events plus stamped ones not yet published (kbis_events_pending, counted when read). */
  async pendingCount(): Promise<number> {
    const waiting = this.stamping === 'stamp'
      ? '(SELECT count(*) FROM events WHERE sequence IS NULL)'
      : `(SELECT count(*) FROM event_handover h, organizations o CROSS JOIN LATERAL
           (SELECT 1 FROM events e WHERE e.org_id = o.id AND e.sequence > h.handed_through) e)`
    const result = await this.db.query<{ n: number }>(`${BACKGROUND_SQL}SELECT ${waiting} + (SELECT count(*) FROM events WHERE pending_publish) AS n`)
    return Number(result.rows[0]?.n ?? 0)
  }

  /** One at a time in this process (the lock serializes processes). */
  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn)
    this.chain = run.catch(() => undefined)
    return run
  }

  private async hasUnstamped(): Promise<boolean> {
    const result = this.stamping === 'stamp'
      ? await this.db.query<{ yes: boolean }>(BACKGROUND_SQL + 'SELECT EXISTS (SELECT 1 FROM events WHERE sequence IS NULL) AS yes', [], { prepare: 'kbis_events_unstamped' })
      : await this.db.query<{ yes: boolean }>(`${BACKGROUND_SQL}SELECT (${LAST_DRAWN}) > (SELECT handed_through FROM event_handover) AS yes`, [], { prepare: 'kbis_events_unhanded' })
    return result.rows[0]?.yes === true
  }

  private async stampAll(wait: boolean): Promise<void> {
    for (;;) {
      const stamped = await this.db.transaction((tx) => this.stampBatch(tx, wait))
      if (stamped === null) return
      if (stamped.count > 0) await this.afterCommit(stamped)
      if (!stamped.more) break
    }
  }

  /** One stamping transaction: null when another process holds the lock (it stamps them). */
  private async stampBatch(tx: Queryable, wait: boolean): Promise<StampedBatch | null> {
    if (wait) {
      await tx.query(BACKGROUND_SQL + 'SELECT pg_advisory_xact_lock($1)', [RELAY_LOCK])
    } else {
      const got = await tx.query<{ ok: boolean }>(BACKGROUND_SQL + 'SELECT pg_try_advisory_xact_lock($1) AS ok', [RELAY_LOCK])
      if (got.rows[0]?.ok !== true) return null
    }
    if (this.stamping === 'written') return this.handOver(tx)
    // A statement of its own, after the lock: its snapshot holds every earlier stamp.
    const batch = await tx.query<{ org_id: string; id: string }>(BACKGROUND_SQL + 'SELECT org_id, id FROM events WHERE sequence IS NULL ORDER BY id LIMIT $1',
      [this.batchSize],
    )
    if (batch.rows.length === 0) return { count: 0, events: [], orgIds: [], more: false }
    const orgIds = [...new Set(batch.rows.map((r) => r.org_id))]
    const whole = await this.wantsEvents(tx, orgIds)
    // Positions base .. base + n - 1 in one draw: only the relay draws, under the lock.
    const drawn = await tx.query<{ base: number }>(`${BACKGROUND_SQL}SELECT setval('event_sequence', nextval('event_sequence') + $1 - 1) - $1 + 1 AS base`,
      [batch.rows.length],
    )
    const base = Number(drawn.rows[0]!.base)
    const result = await tx.query<StampedEventRow & { org_key: string }>(`${BACKGROUND_SQL}UPDATE events e SET sequence = $3::bigint + u.n - 1, pending_publish = $4
       FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS u(org_id, id, n), organizations o
       WHERE e.org_id = u.org_id AND e.id = u.id AND o.id = u.org_id
       RETURNING ${whole ? `${EVENT_COLUMNS}, o.key AS org_key` : 'e.id'}`,
      [batch.rows.map((r) => r.org_id), batch.rows.map((r) => r.id), base, this.options.publishes],
    )
    const events = whole
      ? result.rows
        .sort((a, b) => Number(a.sequence) - Number(b.sequence))
        .map((row) => ({ orgId: row.org_id, orgKey: row.org_key, event: toCloudEvent(row, row.org_key) }))
      : []
    for (const { hook } of this.stampedHooks) await hook(tx, events, orgIds)
    return { count: result.rows.length, events, orgIds, more: batch.rows.length === this.batchSize }
  }

  /**
   * The relay's round on PGlite (`written`): the events already carry their positions, in commit
   * order; those above the mark, up to `batchSize` positions further, go to the hooks as a stamped
   * batch would (whole only when something wants them, marked for publication with a NATS sink),
   * and the mark moves past them in the same transaction. Positions of rolled-back writes are
   * simply missing from the range.
   */
  private async handOver(tx: Queryable): Promise<StampedBatch> {
    const mark = await tx.query<{ handed: string; last: string }>(
      `${BACKGROUND_SQL}SELECT handed_through AS handed, (${LAST_DRAWN}) AS last FROM event_handover`)
    const [handed, last] = [Number(mark.rows[0]!.handed), Number(mark.rows[0]!.last)]
    if (last <= handed) return { count: 0, events: [], orgIds: [], more: false }
    const upto = Math.min(last, handed + this.batchSize)
    const range = [handed, upto]
    // Per organization, on the feed's index (org_id, sequence).
    const counted = await tx.query<{ org_id: string; n: string }>(`${BACKGROUND_SQL}SELECT o.id AS org_id, e.n FROM organizations o
       CROSS JOIN LATERAL (SELECT count(*) AS n FROM events e WHERE e.org_id = o.id AND e.sequence > $1 AND e.sequence <= $2) e
       WHERE e.n > 0 ORDER BY o.id`, range)
    const orgIds = counted.rows.map((r) => r.org_id)
    const count = counted.rows.reduce((sum, r) => sum + Number(r.n), 0)
    const whole = count > 0 && (await this.wantsEvents(tx, orgIds))
    if (count > 0 && this.options.publishes) {
      await tx.query(`${BACKGROUND_SQL}UPDATE events e SET pending_publish = true FROM organizations o
         WHERE e.org_id = o.id AND e.sequence > $1 AND e.sequence <= $2`, range)
    }
    const rows = whole
      ? (await tx.query<StampedEventRow & { org_key: string }>(`${BACKGROUND_SQL}SELECT ${EVENT_COLUMNS}, o.key AS org_key FROM organizations o
           CROSS JOIN LATERAL (SELECT * FROM events e WHERE e.org_id = o.id AND e.sequence > $1 AND e.sequence <= $2) e
           ORDER BY e.sequence`, range)).rows
      : []
    const events = rows.map((row) => ({ orgId: row.org_id, orgKey: row.org_key, event: toCloudEvent(row, row.org_key) }))
    await tx.query(`${BACKGROUND_SQL}UPDATE event_handover SET handed_through = $1`, [upto])
    if (count > 0) for (const { hook } of this.stampedHooks) await hook(tx, events, orgIds)
    return { count, events, orgIds, more: upto < last }
  }

  /** Whether anything needs this batch's events whole: a NATS sink always, a stamped hook if it says so. */
  private async wantsEvents(tx: Queryable, orgIds: readonly string[]): Promise<boolean> {
    if (this.options.publishes) return true
    for (const { wants } of this.stampedHooks) {
      if (wants === null || (await wants(tx, orgIds))) return true
    }
    return false
  }

  private async afterCommit(batch: StampedBatch): Promise<void> {
    for (const hook of this.committedHooks) {
      try {
        await hook(batch.events, batch.orgIds)
      } catch (err) {
        this.options.onError?.(err)
      }
    }
  }

  /**
   * Retention: deletes the stamped events older than `retentionDays`, in sequence order (never one
   * above a kept older one), and records per organization the highest position purged, below
   * which a cursor answers 410 cursor_expired.
   */
  private async purge(wait = false): Promise<number> {
    if (this.options.retentionDays <= 0) return 0
    let total = 0
    for (;;) {
      const deleted = await this.db.transaction(async (tx) => {
        // The scheduled round gives way to a process holding the lock (it will purge); one asked
        // for now waits for it, as a flush waits to stamp.
        if (wait) {
          await tx.query(BACKGROUND_SQL + 'SELECT pg_advisory_xact_lock($1)', [RELAY_LOCK])
        } else {
          const got = await tx.query<{ ok: boolean }>(BACKGROUND_SQL + 'SELECT pg_try_advisory_xact_lock($1) AS ok', [RELAY_LOCK])
          if (got.rows[0]?.ok !== true) return 0
        }
        const result = await tx.query<{ n: number }>(`${BACKGROUND_SQL}WITH cut AS (
             SELECT max(sequence) AS upto FROM events
             WHERE sequence IS NOT NULL AND time < now() - make_interval(days => $1::int)
           ), victims AS (
             SELECT e.org_id, e.id, e.sequence FROM events e, cut
             WHERE e.sequence IS NOT NULL AND e.sequence <= cut.upto
             ORDER BY e.sequence LIMIT 10000
           ), gone AS (
             DELETE FROM events e USING victims v WHERE e.org_id = v.org_id AND e.id = v.id RETURNING e.org_id, e.sequence
           ), marks AS (
             INSERT INTO event_retention AS r (org_id, purged_through)
             SELECT org_id, max(sequence) FROM gone GROUP BY org_id ORDER BY org_id
             ON CONFLICT (org_id) DO UPDATE SET purged_through = greatest(r.purged_through, EXCLUDED.purged_through)
           )
           SELECT count(*) AS n FROM gone`,
          [this.options.retentionDays],
        )
        return Number(result.rows[0]?.n ?? 0)
      })
      total += deleted
      if (deleted < 10000) break
    }
    for (const hook of this.retentionHooks) await hook(this.options.retentionDays)
    return total
  }
}
