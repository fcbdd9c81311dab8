import type { Db, Queryable } from '../store/db.js'
import { metrics } from '../ops/metrics.js'
import { isPgError } from '../core/pg-errors.js'
import { toCloudEvent, type CloudEvent } from '../outbox/cloud-event.js'
import { onEventsWritten, stampingOf, type Stamping } from '../outbox/write.js'
import { FIRST_ROUND_AFTER_MS, scheduleRounds } from '../core/rounds.js'
import {
  countEventsPending, dropSequenceDefault, eventsWaiting, markForPublication, numberUnpositioned, PURGE_BATCH, purgeOldestEvents,
  selectHandoverRanges, selectRangeEvents, selectUnstamped, setHandoverMarks, stampEvents, takeRelayLock,
} from './relay-sql.js'

export { HOLD_RELAY_LOCK, RELAY_LOCK } from './relay-sql.js'

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
 * to 5 s, as the LISTEN connection does (store/postgres-db.ts); a round that succeeds resets it. Polling
 * every `intervalMs` regardless put a failure in the log ten times a second.
 */
const RELAY_RETRY_FIRST_MS = 250
const RELAY_RETRY_MAX_MS = 5_000
/** A stamping transaction quicker than this lets the next one take twice as many events (up to the batch size). */
const GROW_BELOW_MS = 1_000

/**
 * How long, on PGlite, a commit's hand-over waits for later commits to join its round. Single
 * creates in a row, in process: 180–250 → 408–490 a second with 20 ms (one round per 5–7
 * creates instead of one each); webhooks and NATS get the events that much later.
 */
export const HANDOVER_GATHER_MS = 20

/**
 * The event relay (docs/decisions/0003-event-feed-ordering.md). Writers insert events with
 * `sequence` NULL in their own transaction; the relay, alone under `RELAY_LOCK`, gives every
 * committed unstamped event its organization's next positions, in `id` order (ids of one process
 * sort in creation order), in batches. A stamping transaction only sees committed rows and runs after
 * every earlier stamping transaction committed, so each position it gives is higher than every
 * position a reader could already see: `WHERE sequence > cursor` never skips a late committer.
 */
export class EventRelay {
  private readonly stampedHooks: { hook: StampedHook; wants: WantsEvents | null }[] = []
  private readonly committedHooks: CommittedHook[] = []
  private readonly stoppedHooks: (() => Promise<void>)[] = []
  private readonly retentionHooks: ((retentionDays: number) => Promise<void>)[] = []
  private timer: NodeJS.Timeout | null = null
  private stopRetention: (() => void) | null = null
  private chain: Promise<unknown> = Promise.resolve()
  private tickQueued = false
  /** The wake that this process's commits are waiting for (see wakeAfterCommit). */
  private due: NodeJS.Timeout | null = null
  private stopped = false
  private readonly batchSize: number
  /**
   * Events per stamping transaction now: `batchSize`, halved after a transaction ran past the
   * statement timeout, doubled back after each one that stamped. What a batch costs grows with
   * what its hooks do per event: one delivery per matching webhook, each with the event's JSON
   * (an outside probe: 5,000 events of 1 kB for 70 webhooks, 350,000 rows, ran past 10 s). The
   * same batch timing out again and again held every organization's events back.
   */
  private size: number
  private unlisten: (() => void) | null = null
  private unwatch: (() => void) | null = null
  /** Failed rounds in a row, the last one's message, and when rounds may run again. */
  private failures = 0
  private lastFailure = ''
  private retryAt = 0
  readonly stamping: Stamping

  constructor(private readonly db: Db, private readonly options: RelayOptions) {
    this.batchSize = options.batchSize ?? 5000
    this.size = this.batchSize
    this.stamping = stampingOf(db.kind)
  }

  /**
   * Sets the store up for its way of stamping (before start). Writers give `sequence` themselves
   * (outbox/write.ts eventPositionSql), so it has no default on either store (an earlier version
   * drew it from `event_sequence` on PGlite, and a copy of such a store carries that default). On
   * PGlite, events written without one get theirs in the next hand-over round (numberUnpositioned).
   */
  async prepare(): Promise<void> {
    await dropSequenceDefault(this.db)
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
      const round = () => void this.serialize(() => this.purge()).catch((err) => this.options.onError?.(err))
      this.stopRetention = scheduleRounds(round, this.options.retentionIntervalMs ?? 3_600_000, FIRST_ROUND_AFTER_MS)
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
    this.stopRetention?.()
    this.timer = null
    this.stopRetention = null
    await this.serialize(() => this.stampAll(true)).catch((err) => this.options.onError?.(err))
    for (const hook of this.stoppedHooks) await hook().catch((err) => this.options.onError?.(err))
  }

  /** Stamps soon, without waiting (a poll tick; a commit of this process, see wakeAfterCommit). */
  wake(): void {
    if (this.tickQueued || this.stopped || Date.now() < this.retryAt) return
    this.tickQueued = true
    void this.serialize(async () => {
      this.tickQueued = false
      if (await eventsWaiting(this.db, this.stamping)) await this.stampAll(false)
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
      if (await eventsWaiting(this.db, this.stamping)) await this.stampAll(true)
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
    return countEventsPending(this.db, this.stamping)
  }

  /** One at a time in this process (the lock serializes processes). */
  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn)
    this.chain = run.catch(() => undefined)
    return run
  }

  private async stampAll(wait: boolean): Promise<void> {
    for (;;) {
      const started = Date.now()
      const stamped = await this.db.transaction((tx) => this.stampBatch(tx, wait)).catch((err: unknown) => {
        // 57014: past the statement timeout. The next round takes half as many events.
        if (isPgError(err, '57014')) this.size = Math.max(1, Math.floor(this.size / 2))
        throw err
      })
      if (stamped === null) return
      if (stamped.count > 0) {
        if (Date.now() - started < GROW_BELOW_MS) this.size = Math.min(this.batchSize, this.size * 2)
        await this.afterCommit(stamped)
      }
      if (!stamped.more) break
    }
  }


  /** One stamping transaction: null when another process holds the lock (it stamps them). */
  private async stampBatch(tx: Queryable, wait: boolean): Promise<StampedBatch | null> {
    if (!(await takeRelayLock(tx, wait))) return null
    if (this.stamping === 'written') return this.handOver(tx)
    const size = this.size
    const batch = await selectUnstamped(tx, size)
    if (batch.length === 0) return { count: 0, events: [], orgIds: [], more: false }
    const orgIds = [...new Set(batch.map((r) => r.org_id))]
    // Each organization's events of the batch, in id order, continue its highest position: only
    // the relay gives positions, under the lock, so no other stamp runs in between.
    const whole = await this.wantsEvents(tx, orgIds)
    const stamped = await stampEvents(tx, batch, this.options.publishes, whole)
    const events = stamped.events
      .sort((a, b) => Number(a.n) - Number(b.n))
      .map((row) => ({ orgId: row.org_id, orgKey: row.org_key, event: toCloudEvent(row, row.org_key) }))
    for (const { hook } of this.stampedHooks) await hook(tx, events, orgIds)
    return { count: stamped.count, events, orgIds, more: batch.length === size }
  }


  /**
   * The relay's round on PGlite (`written`): the events already carry their positions, in commit
   * order. Each organization's events above its mark, up to `batchSize` of them, go to the hooks
   * as a stamped batch would (whole only when something wants them, marked for publication with a
   * NATS sink), and the marks move past them in the same transaction. Organizations come in id
   * order, each one's events in position order (nothing orders events across organizations: each
   * has its own feed, webhooks and NATS subjects).
   */
  private async handOver(tx: Queryable): Promise<StampedBatch> {
    await numberUnpositioned(tx)
    const ranges = await selectHandoverRanges(tx, this.batchSize)
    if (ranges.length === 0) return { count: 0, events: [], orgIds: [], more: false }
    const orgIds = ranges.map((r) => r.org_id)
    const count = ranges.reduce((sum, r) => sum + Number(r.n), 0)
    const whole = await this.wantsEvents(tx, orgIds)
    if (this.options.publishes) await markForPublication(tx, ranges)
    const rows = whole ? await selectRangeEvents(tx, ranges) : []
    const events = rows.map((row) => ({ orgId: row.org_id, orgKey: row.org_key, event: toCloudEvent(row, row.org_key) }))
    await setHandoverMarks(tx, ranges)
    for (const { hook } of this.stampedHooks) await hook(tx, events, orgIds)
    return { count, events, orgIds, more: ranges.some((r) => Number(r.n) === this.batchSize) }
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
   * Retention: deletes the stamped events older than `retentionDays`, each organization's in
   * sequence order (never one above a kept older one), and records per organization the highest
   * position purged, below which a cursor answers 410 cursor_expired and above which the
   * organization's positions continue.
   */
  private async purge(wait = false): Promise<number> {
    if (this.options.retentionDays <= 0) return 0
    let total = 0
    for (;;) {
      const deleted = await this.db.transaction(async (tx) => {
        // The scheduled round gives way to a process holding the lock (it will purge); one asked
        // for now waits for it, as a flush waits to stamp.
        if (!(await takeRelayLock(tx, wait))) return 0
        return purgeOldestEvents(tx, this.options.retentionDays)
      })
      total += deleted
      if (deleted < PURGE_BATCH) break
    }
    for (const hook of this.retentionHooks) await hook(this.options.retentionDays)
    return total
  }
}
