import { FailFastRedis } from './redis.js'
import { Outage } from './outage.js'
import { isStoreUnreachable } from './unreachable.js'
import { openDb, type Db, type ListenEvents, type QueryOptions, type QueryResult, type TransactionOptions, type Tx } from './db.js'

/**
 * Read replicas (CONTRACT §17): with `DATABASE_READ_URL`, the heavy reads (lists, search,
 * analytics, export) go to a streaming replica, except for an API key that wrote in the last
 * `KBIS_READ_AFTER_WRITE_MS` (it must read what it has just written: the replica lags), and except
 * while the replica does not answer (reads fall back to the primary). Everything else — writes,
 * reads by id, authentication, caches — stays on the primary.
 */

/** Who wrote recently, shared by every process that serves the same keys. */
export interface WriteMarks {
  /** Marks the write for every process; false when it could not (Redis unavailable). */
  mark(orgId: string, keyId: string): Promise<boolean>
  /** Whether the key wrote within the window; true when that cannot be known (the primary answers then). */
  recent(orgId: string, keyId: string): Promise<boolean>
  close(): Promise<void>
}

/**
 * Across processes and hosts: Redis when `REDIS_URL` is set (a key that expires by itself);
 * else the primary itself, in the unlogged table `api_key_writes` (migration 0006): one primary-key
 * upsert per write and one primary-key read per replica read — far cheaper than the reads that move.
 * Redis fails fast (FailFastRedis): while it is down or stops answering, no request waits for it;
 * reads go to the primary, and ReadRouting tells the write to every process by other means.
 */
class RedisMarks implements WriteMarks {
  private readonly shared: FailFastRedis
  constructor(url: string, private readonly windowMs: number, private readonly onDown: (err: unknown) => void) {
    this.shared = new FailFastRedis(url)
  }
  async mark(orgId: string, keyId: string): Promise<boolean> {
    return (await this.shared.attempt((redis) => redis.set(`kbis:wrote:${orgId}:${keyId}`, '1', 'PX', this.windowMs), this.onDown)).ok
  }
  async recent(orgId: string, keyId: string): Promise<boolean> {
    const found = await this.shared.attempt((redis) => redis.exists(`kbis:wrote:${orgId}:${keyId}`), this.onDown)
    return !found.ok || found.value === 1
  }
  async close(): Promise<void> {
    await this.shared.close()
  }
}

class PrimaryMarks implements WriteMarks {
  constructor(private readonly primary: Db, private readonly windowMs: number) {}
  async mark(orgId: string, keyId: string): Promise<boolean> {
    await this.primary.query(
      `INSERT INTO api_key_writes (org_id, api_key_id, written_at) VALUES ($1, $2, clock_timestamp())
       ON CONFLICT (org_id, api_key_id) DO UPDATE SET written_at = EXCLUDED.written_at`,
      [orgId, keyId], { prepare: 'kbis_mark_write' })
    return true
  }
  async recent(orgId: string, keyId: string): Promise<boolean> {
    const res = await this.primary.query(
      `SELECT 1 FROM api_key_writes WHERE org_id = $1 AND api_key_id = $2
         AND written_at > clock_timestamp() - make_interval(secs => $3::float8 / 1000)`,
      [orgId, keyId, this.windowMs], { prepare: 'kbis_recent_write' })
    return res.rowCount > 0
  }
  async close(): Promise<void> {}
}

/**
 * A query the replica could not answer *yet* (the primary can): cancelled by a conflict with
 * recovery (40001), or a table the primary created that the replica has not replayed (42P01).
 */
function replicaBehind(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return code === '40001' || code === '42P01'
}

/** After a connection failure the replica is skipped this long, so a dead replica costs one timeout, not one per request. */
const REPLICA_BACKOFF_MS = 5_000

/**
 * The store the replica-reading routes get: statements run on the replica, or on the primary when
 * the replica is down or behind. Transactions (a projection created on first need) and
 * notifications go to the primary: a replica takes no writes.
 */
export class ReplicaReader implements Db {
  readonly kind = 'postgres' as const
  onQuery: Db['onQuery'] = null
  private readonly outage = new Outage(REPLICA_BACKOFF_MS)
  fallbacks = 0

  constructor(private readonly primary: Db, readonly replica: Db, private readonly onDown: (err: unknown) => void) {}

  query<R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}): Promise<QueryResult<R>> {
    this.onQuery?.(sql)
    return this.route((db) => db.query<R>(sql, params, options), this.onDown)
  }

  copyLines(select: string, params: readonly unknown[]): Promise<Buffer[]> {
    this.onQuery?.(select)
    return this.route((db) => db.copyLines!(select, params), this.onDown)
  }

  /**
   * This reader for one request: a replica found down while serving it is reported by `onDown`
   * (the request's logger, so that the line carries its request id) instead of the process's.
   */
  forRequest(onDown: (err: unknown) => void): Db {
    const reader = this
    return {
      kind: 'postgres',
      get onQuery() { return reader.onQuery },
      set onQuery(hook) { reader.onQuery = hook },
      query<R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}): Promise<QueryResult<R>> {
        reader.onQuery?.(sql)
        return reader.route((db) => db.query<R>(sql, params, options), onDown)
      },
      copyLines(select: string, params: readonly unknown[]): Promise<Buffer[]> {
        reader.onQuery?.(select)
        return reader.route((db) => db.copyLines!(select, params), onDown)
      },
      transaction: (fn, options) => reader.transaction(fn, options),
      listen: (channel, onMessage, events) => reader.listen(channel, onMessage, events),
      notify: (channel, payload) => reader.notify(channel, payload),
      close: async () => undefined,
    } as Db
  }

  /** On the replica, or on the primary when the replica is down or behind. */
  private async route<T>(run: (db: Db) => Promise<T>, onDown: (err: unknown) => void): Promise<T> {
    if (this.outage.due) {
      try {
        const result = await run(this.replica)
        this.outage.answered()
        return result
      } catch (err) {
        if (isStoreUnreachable(err)) this.outage.failed(err, onDown)
        else if (!replicaBehind(err)) throw err
      }
    }
    this.fallbacks++
    return run(this.primary)
  }

  transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.primary.transaction(fn, options)
  }
  listen(channel: string, onMessage: (payload: string) => void, events?: ListenEvents): Promise<void> {
    return this.primary.listen(channel, onMessage, events)
  }
  notify(channel: string, payload: string): Promise<void> {
    return this.primary.notify(channel, payload)
  }
  close(): Promise<void> {
    return this.replica.close()
  }
}

export interface ReadRoutingOptions {
  readUrl: string
  readAfterWriteMs: number
  redisUrl?: string | undefined
  poolSize: number
  statementTimeoutMs?: number | undefined
  parallelSetupCost?: number | undefined
  /** PostgreSQL schema, as for the primary (tests). */
  schema?: string | undefined
  onReplicaDown(err: unknown): void
  /** Redis (the marks') unavailable: told once per outage. */
  onMarksDown?(err: unknown): void
}

/** The writes Redis could not mark, told by the primary to every process (ReadRouting.markWrite). */
export const WROTE_CHANNEL = 'kbis_wrote'

/**
 * A replica statement without an answer this long after the statement timeout fails on the
 * client's side, and the read falls back to the primary: a replica that stopped answering (a
 * frozen machine, a network that drops packets) cannot fire its own `statement_timeout`.
 */
export const REPLICA_ANSWER_MARGIN_MS = 1_000


/** Which store a request reads from, and the write marks that decide it. */
export class ReadRouting {
  /** This process's own writers: no round trip for the common case of a client on one connection. */
  private readonly local = new Map<string, number>()

  constructor(readonly primary: Db, readonly reader: ReplicaReader, private readonly marks: WriteMarks, private readonly windowMs: number) {}

  /**
   * The replica reader, unless this key wrote within the window (then the primary); with
   * `onDown`, the reader of one request, reporting a replica found down there.
   */
  async readerFor(orgId: string, keyId: string, onDown?: (err: unknown) => void): Promise<Db> {
    const until = this.local.get(keyId)
    if (until !== undefined) {
      if (until > Date.now()) return this.primary
      this.local.delete(keyId)
    }
    // When the marks cannot be read, the primary answers: correct, only slower.
    const recent = await this.marks.recent(orgId, keyId).catch(() => true)
    return recent ? this.primary : onDown ? this.reader.forRequest(onDown) : this.reader
  }

  async markWrite(orgId: string, keyId: string): Promise<void> {
    this.remember(keyId)
    if (await this.marks.mark(orgId, keyId)) return
    // Redis could not take the mark: every process hears of the write from the primary and
    // remembers it as its own (a mark missing from Redis once it is back would send the key's
    // next reads on another process to the lagging replica).
    await this.primary.notify(WROTE_CHANNEL, keyId)
  }

  /** This key wrote just now: its reads in this process go to the primary for the window. */
  remember(keyId: string): void {
    this.local.set(keyId, Date.now() + this.windowMs)
  }

  async close(): Promise<void> {
    await this.marks.close().catch(() => undefined)
    await this.reader.close().catch(() => undefined)
  }
}

export async function openReadRouting(primary: Db, options: ReadRoutingOptions): Promise<ReadRouting> {
  const replica = await openDb({ databaseUrl: options.readUrl, poolSize: options.poolSize, schema: options.schema, connectTimeoutMs: 1_000,
    statementTimeoutMs: options.statementTimeoutMs, parallelSetupCost: options.parallelSetupCost,
    answerTimeoutMs: options.statementTimeoutMs ? options.statementTimeoutMs + REPLICA_ANSWER_MARGIN_MS : undefined })
  const marks: WriteMarks = options.redisUrl
    ? new RedisMarks(options.redisUrl, options.readAfterWriteMs, options.onMarksDown ?? (() => undefined))
    : new PrimaryMarks(primary, options.readAfterWriteMs)
  const routing = new ReadRouting(primary, new ReplicaReader(primary, replica, options.onReplicaDown), marks, options.readAfterWriteMs)
  if (options.redisUrl) await primary.listen(WROTE_CHANNEL, (keyId) => routing.remember(keyId))
  return routing
}
