import { BACKGROUND_SQL, type Db, type Queryable } from '../store/db.js'
import { metrics } from '../ops/metrics.js'
import { EVENT_COLUMNS, toCloudEvent, type CloudEvent, type StampedEventRow } from '../outbox/cloud-event.js'
import { onEventsWritten } from '../outbox/write.js'

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
}

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
  onError?: (err: unknown) => void
}

/**
 * One advisory lock for the whole store: stamping transactions of every server process are
 * serialized by it, which is what makes `sequence` follow commit order (decision 0003).
 */
export const RELAY_LOCK = 727_160_009

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
  private stopped = false
  private readonly batchSize: number
  private unlisten: (() => void) | null = null

  constructor(private readonly db: Db, private readonly options: RelayOptions) {
    this.batchSize = options.batchSize ?? 5000
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
    // Events this process writes wake it at once (a tick before their commit finds nothing; the
    // next one, or the wake after the response, stamps them). Other processes' events: the poll.
    this.unlisten = onEventsWritten(() => setTimeout(() => this.wake(), 5).unref())
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
    this.unlisten?.()
    if (this.retentionTimer) clearInterval(this.retentionTimer)
    this.timer = null
    this.retentionTimer = null
    await this.serialize(() => this.stampAll(true)).catch((err) => this.options.onError?.(err))
    for (const hook of this.stoppedHooks) await hook().catch((err) => this.options.onError?.(err))
  }

  /** Stamps soon, without waiting (a write of this process just committed; a poll tick). */
  wake(): void {
    if (this.tickQueued || this.stopped) return
    this.tickQueued = true
    void this.serialize(async () => {
      this.tickQueued = false
      if (!(await this.hasUnstamped())) return
      await this.stampAll(false)
    }).catch((err) => this.options.onError?.(err))
  }

  /**
   * Stamps every event committed so far, waiting for the lock if another process holds it, and
   * runs the hooks; when it resolves, a feed read sees every event committed before the call.
   */
  async flush(): Promise<void> {
    await this.serialize(async () => {
      if (await this.hasUnstamped()) await this.stampAll(true)
    })
  }

  /** Runs retention now (tests; otherwise hourly). */
  async purgeNow(): Promise<number> {
    return this.serialize(() => this.purge())
  }

  /** Unstamped events plus stamped ones not yet published (kbis_events_pending). */
  async pendingCount(): Promise<number> {
    const result = await this.db.query<{ n: number }>(`${BACKGROUND_SQL}SELECT (SELECT count(*) FROM events WHERE sequence IS NULL) + (SELECT count(*) FROM events WHERE pending_publish) AS n`,
    )
    return Number(result.rows[0]?.n ?? 0)
  }

  /** One at a time in this process (the lock serializes processes). */
  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn)
    this.chain = run.catch(() => undefined)
    return run
  }

  private async hasUnstamped(): Promise<boolean> {
    const result = await this.db.query<{ yes: boolean }>(BACKGROUND_SQL + 'SELECT EXISTS (SELECT 1 FROM events WHERE sequence IS NULL) AS yes', [], { prepare: 'kbis_events_unstamped' })
    return result.rows[0]?.yes === true
  }

  private async stampAll(wait: boolean): Promise<void> {
    for (;;) {
      const stamped = await this.db.transaction((tx) => this.stampBatch(tx, wait))
      if (stamped === null) return
      if (stamped.count > 0) await this.afterCommit(stamped)
      if (stamped.count < this.batchSize) break
    }
    await this.reportPending()
  }

  /** Sets kbis_events_pending (after a stamping round, after a publication). */
  async reportPending(): Promise<void> {
    metrics.eventsPending.set(await this.pendingCount())
  }

  /** One stamping transaction: null when another process holds the lock (it stamps them). */
  private async stampBatch(tx: Queryable, wait: boolean): Promise<StampedBatch | null> {
    if (wait) {
      await tx.query(BACKGROUND_SQL + 'SELECT pg_advisory_xact_lock($1)', [RELAY_LOCK])
    } else {
      const got = await tx.query<{ ok: boolean }>(BACKGROUND_SQL + 'SELECT pg_try_advisory_xact_lock($1) AS ok', [RELAY_LOCK])
      if (got.rows[0]?.ok !== true) return null
    }
    // A statement of its own, after the lock: its snapshot holds every earlier stamp.
    const batch = await tx.query<{ org_id: string; id: string }>(BACKGROUND_SQL + 'SELECT org_id, id FROM events WHERE sequence IS NULL ORDER BY id LIMIT $1',
      [this.batchSize],
    )
    if (batch.rows.length === 0) return { count: 0, events: [], orgIds: [] }
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
    return { count: result.rows.length, events, orgIds }
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
  private async purge(): Promise<number> {
    if (this.options.retentionDays <= 0) return 0
    let total = 0
    for (;;) {
      const deleted = await this.db.transaction(async (tx) => {
        const got = await tx.query<{ ok: boolean }>(BACKGROUND_SQL + 'SELECT pg_try_advisory_xact_lock($1) AS ok', [RELAY_LOCK])
        if (got.rows[0]?.ok !== true) return 0
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
