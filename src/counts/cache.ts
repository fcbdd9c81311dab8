/**
 * Counts of filtered lists and searches, and analytics answers, remembered until the
 * organization's data changes (docs/decisions/0012-count-cache.md).
 *
 * A filtered `total_items` costs a `count(*)` over up to 10,001 matches (CONTRACT §1): tens of
 * milliseconds at 200,000 assets, where the page itself takes one; an aggregate reads every
 * matching asset. Clients ask the same question again and again (page 2, 3, … of a search; a
 * dashboard polling a filter or a chart), so the result of a statement is kept per organization
 * and *generation*: every committed write to the organization's assets or relationships starts a
 * new generation, and a result is only ever answered for the generation it was taken in.
 *
 * - This process's writes: the write paths call {@link noteDataWrite} inside their transaction;
 *   the generation moves once it has committed (`Tx.afterCommit`), so a result taken meanwhile
 *   (it saw the old data) is already stale when the new data becomes visible.
 * - Other processes on the same PostgreSQL: the event relay notifies the organizations whose
 *   events it stamped (every asset and relationship write emits events), on `kbis_data_changed`.
 * - A memo remembers a result only if no generation started while it was taken, and results
 *   older than {@link COUNT_TTL_MS} are taken again whatever happened (a lost notification, a
 *   listening connection down) — the same window of staleness that two separate statements
 *   (page, then count) already have under concurrent writes, bounded.
 * - Capacity is in rows: a count weighs 1, an analytics answer its number of rows; an answer of
 *   more rows than a quarter of the capacity is not kept.
 */
import type { Queryable, Tx } from '../store/db.js'
import type { ResultMemo } from '../store/sql.js'

/** Notification channel: payload = organization ids (comma-separated) whose data changed. */
export const DATA_CHANGED_CHANNEL = 'kbis_data_changed'
/** A remembered result is taken again after this long, whatever the notifications said. */
export const COUNT_TTL_MS = 10_000

interface Entry {
  generation: number
  /** The store's data version the result was taken at (MemoOptions.version); undefined without one. */
  version: string | undefined
  value: unknown
  weight: number
  at: number
}

const commitListeners = new Set<(orgId: string) => void>()

/**
 * Called by every write path of assets and relationships after its statement: once the
 * transaction commits (at once for a statement outside any transaction, already committed), the
 * organization's remembered counts are dropped in every cache of this process.
 */
export function noteDataWrite(db: Queryable | Tx, orgId: string): void {
  const changed = (): void => {
    for (const fn of commitListeners) fn(orgId)
  }
  if ('afterCommit' in db) db.afterCommit(changed)
  else changed()
}

/** Where a request reads: the primary, or a streaming replica (store/replica.ts). */
export type CountSource = 'primary' | 'replica'

export interface MemoOptions {
  /** Where the request reads (default the primary). */
  source?: CountSource
  /** What the results are (`count`, `analytics`): each kind has its own statements. */
  kind?: string
  /** The client asked for a fresh answer (`Cache-Control: no-cache`): nothing is read, results are still remembered. */
  fresh?: boolean
  /**
   * The organization's data version on the request's store (PostgreSQL: events/sql.ts
   * selectDataVersion): a result is answered only for the version it was taken at, so a write
   * committed by another process is never missed, notified or not; null (writes still being
   * stamped) reads and remembers nothing.
   */
  version?: DataVersion
}

/** How a memo learns the store's data version (MemoOptions.version). */
export interface DataVersion {
  /** Asks the store, once, before the first read, unless a statement of the request read it already. */
  ask(): Promise<string | null>
  /** The same as a scalar subquery, the organization bound to `org` (ResultMemo.version). */
  sql(org: string): string
}

export class ResultCache {
  private readonly generations = new Map<string, number>()
  /** When each organization's current generation started (ms); absent: at `since`. */
  private readonly startedAt = new Map<string, number>()
  /** By organization, then statement; Map order is insertion order (oldest first, for eviction). */
  private readonly entries = new Map<string, Map<string, Entry>>()
  /** The rows held: the sum of the entries' weights. */
  private size = 0
  private since: number
  private readonly unsubscribe: () => void

  /**
   * @param capacity the rows held at most (KBIS_COUNT_CACHE_SIZE).
   * @param replicaLagMs with a read replica, the longest its replay may lag the primary (the
   *   operator's KBIS_READ_AFTER_WRITE_MS): a result taken on the replica is remembered only if its
   *   generation had started that long before, so that the replica held the generation's data.
   */
  constructor(
    private readonly capacity: number,
    private readonly now: () => number = Date.now,
    private readonly replicaLagMs = 0,
    /** Told of each read: the kind of result and whether it was remembered (the metrics). */
    private readonly observe: (kind: string, outcome: 'hit' | 'miss' | 'fresh') => void = () => {},
  ) {
    this.since = now()
    const listener = (orgId: string): void => this.changed(orgId)
    commitListeners.add(listener)
    this.unsubscribe = () => void commitListeners.delete(listener)
  }

  /** The organization's data changed (no organization: anything may have changed). */
  changed(orgId?: string): void {
    if (orgId === undefined) {
      for (const org of this.generations.keys()) this.generations.set(org, this.generation(org) + 1)
      this.startedAt.clear()
      this.since = this.now()
      this.entries.clear()
      this.size = 0
      return
    }
    this.generations.set(orgId, this.generation(orgId) + 1)
    this.startedAt.set(orgId, this.now())
    for (const entry of this.entries.get(orgId)?.values() ?? []) this.size -= entry.weight
    this.entries.delete(orgId)
  }

  /**
   * A memo for one request (one organization): it reads and remembers results of the generation
   * current now. Results taken on a replica are kept apart from the primary's (a key that has just
   * written reads from the primary and must never get a replica's older figure), and are
   * remembered only once the replica has had `replicaLagMs` to replay the generation's writes.
   */
  memo<T = number>(orgId: string, options: MemoOptions = {}): ResultMemo<T> {
    const generation = this.generation(orgId)
    const began = this.now()
    const source = options.source ?? 'primary'
    const kind = options.kind ?? 'count'
    const prefix = `${source === 'replica' ? 'replica:' : ''}${kind}:`
    const settled = source === 'primary' || began - (this.startedAt.get(orgId) ?? this.since) >= this.replicaLagMs
    let asked: Promise<string | null> | undefined
    /** The version read before the result was taken (undefined: no version source). */
    let version: string | null | undefined
    const versionSource = options.version
    return {
      ...(versionSource ? { version: { orgId, sql: versionSource.sql, heard: (v: string | null) => void (asked ??= Promise.resolve(v)) } } : {}),
      read: async (statement) => {
        if (versionSource) version = await (asked ??= versionSource.ask())
        if (options.fresh) {
          this.observe(kind, 'fresh')
          return undefined
        }
        const entry = this.entries.get(orgId)?.get(prefix + statement)
        const hit = entry !== undefined && version !== null && entry.version === version
          && entry.generation === this.generation(orgId) && this.now() - entry.at <= COUNT_TTL_MS
        this.observe(kind, hit ? 'hit' : 'miss')
        return hit ? entry.value as T : undefined
      },
      write: (statement, value, weight = 1) => {
        // A write committed while the result was taken: it may predate it, keep nothing.
        if (this.capacity <= 0 || (weight > 1 && weight > this.capacity / 4) || generation !== this.generation(orgId) || !settled) return
        // Writes being stamped when it was read, or never read: no version to keep it for.
        if (version === null || (versionSource && version === undefined)) return
        let byStatement = this.entries.get(orgId)
        if (byStatement === undefined) this.entries.set(orgId, (byStatement = new Map()))
        const previous = byStatement.get(prefix + statement)
        if (previous !== undefined) {
          byStatement.delete(prefix + statement)
          this.size -= previous.weight
        }
        byStatement.set(prefix + statement, { generation, version, value, weight, at: this.now() })
        this.size += weight
        this.evict()
      },
    }
  }

  close(): void {
    this.unsubscribe()
  }

  private generation(orgId: string): number {
    return this.generations.get(orgId) ?? 0
  }

  /** Drops the oldest results of the organizations first remembered until the cache fits. */
  private evict(): void {
    for (const [org, byStatement] of this.entries) {
      if (this.size <= this.capacity) return
      for (const [statement, entry] of byStatement) {
        if (this.size <= this.capacity) break
        byStatement.delete(statement)
        this.size -= entry.weight
      }
      if (byStatement.size === 0) this.entries.delete(org)
    }
  }
}
