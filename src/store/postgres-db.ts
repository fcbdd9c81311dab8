/*
 * The PostgreSQL backend of the store (store/db-api.ts says what a store is): a pg Pool, one
 * listening connection for notifications, prepared statements per connection.
 */
import { createHash } from 'node:crypto'
import { userInfo } from 'node:os'
import pg from 'pg'
import { copyLines } from './copy.js'
import { retryTransient } from './retry.js'
import { isStoreUnreachable, markConnectFailure } from './unreachable.js'
import { parseTimestamptz } from './timestamps.js'
import { BACKGROUND_SQL, runCommitted, type Db, type ListenEvents, type QueryHook, type QueryOptions, type QueryResult, type StoreOptions, type TransactionOptions, type Tx } from './db-api.js'

/** Back-off of the listening connection's reconnection: 250 ms, doubling, at most 5 s. */
const LISTEN_RETRY_FIRST_MS = 250
const LISTEN_RETRY_MAX_MS = 5_000

// A DATABASE_URL without a user name logs in as the operating system's user, as libpq (psql)
// does: pg takes PGUSER or USER only, and a service started without USER (a container, cron,
// systemd) was refused with "no PostgreSQL user name specified in startup packet".
if (!pg.defaults.user && !process.env.PGUSER) {
  try {
    pg.defaults.user = userInfo().username
  } catch {
    // A uid without a name (a container's arbitrary uid): PostgreSQL says which name is missing.
  }
}

// int8 (count(*), sums of integers) and numeric come back as JS numbers, not strings: the API
// answers JSON numbers and counts never exceed 2^53 here.
pg.types.setTypeParser(20, (v) => Number(v))
pg.types.setTypeParser(1700, (v) => Number(v))
// timestamptz: Dates that keep their ISO second text (store/timestamps.ts); PGlite below too.
pg.types.setTypeParser(1184, parseTimestamptz)

/**
 * Statements one PostgreSQL connection keeps prepared (QueryOptions.prepare). Past it the
 * connection forgets them all (`DEALLOCATE ALL`) and starts again: the shapes of filters a
 * client can send are many, a server's memory per statement is not nothing (≈ 32 kB each), and
 * the hot ones come back at once.
 */
export const PREPARED_PER_CONNECTION = 100

/** The name a generated statement is prepared under: its text's digest (no two texts share one). */
function statementName(sql: string): string {
  return `kbis_q_${createHash('sha256').update(sql).digest('base64url').slice(0, 32)}`
}

/** The names pg has prepared on a connection (pg keeps them on the connection, not in its API). */
function preparedOn(client: pg.PoolClient): Record<string, string> | undefined {
  return (client as unknown as { connection?: { parsedStatements?: Record<string, string> } }).connection?.parsedStatements
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const
  onQuery: QueryHook | null = null
  private listener: pg.Client | null = null
  private readonly handlers = new Map<string, ((payload: string) => void)[]>()

  /** The pool's connections handed out now (the pool tells when, not which). */
  private readonly busy = new Set<pg.PoolClient>()
  /** Connections whose transaction has sent its COMMIT (and not yet heard the answer). */
  private readonly committing = new Set<pg.PoolClient>()

  constructor(readonly pool: pg.Pool, private readonly config: pg.PoolConfig) {
    pool.on('acquire', (client) => void this.busy.add(client))
    pool.on('release', (_err, client) => void this.busy.delete(client))
  }

  async query<R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}): Promise<QueryResult<R>> {
    if (!sql.startsWith(BACKGROUND_SQL)) this.onQuery?.(sql)
    if (options.prepare !== undefined) return this.queryPrepared<R>(options.prepare === true ? statementName(sql) : options.prepare, sql, params)
    return this.onConnection(async (client) => {
      const res = await client.query(sql, params as unknown[])
      return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 }
    })
  }

  /**
   * `fn` on a pooled connection, given back afterwards. A statement's own error leaves the
   * connection sound, and it goes back to the pool (pool.query would drop it); any other error
   * drops it.
   */
  private async onConnection<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkout()
    let failure: Error | undefined
    try {
      return await fn(client)
    } catch (err) {
      if (!(err instanceof pg.DatabaseError)) failure = err as Error
      throw err
    } finally {
      release(failure)
    }
  }

  /** QueryOptions.prepare: the statement under `name`, within PREPARED_PER_CONNECTION. */
  private queryPrepared<R>(name: string, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
    return this.onConnection(async (client) => {
      const held = preparedOn(client)
      if (held !== undefined && held[name] === undefined && Object.keys(held).length >= PREPARED_PER_CONNECTION) {
        await client.query('DEALLOCATE ALL')
        for (const key of Object.keys(held)) delete held[key]
      }
      const query = { name, text: sql, values: params as unknown[] }
      const res = await client.query(query).catch(async (err: unknown) => {
        if (!(err instanceof pg.DatabaseError) || held?.[name] === undefined) throw err
        if (err.code === '0A000') {
          // Prepared before a table it reads changed the type of a column it returns, it fails on
          // every run ("cached plan must not change result type"): prepared again.
          await client.query(`DEALLOCATE "${name}"`)
        } else if (err.code !== '26000') {
          throw err
        }
        // 26000: the server no longer has it (a `DISCARD ALL` or `DEALLOCATE` by someone else on
        // this connection, e.g. a pooler handing it over): prepared again.
        delete held[name]
        return client.query(query)
      })
      return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 }
    })
  }

  /**
   * A pooled connection for the caller's statements, and how to give it back. While a connection
   * is checked out pg-pool hears none of its errors: one that drops then (PostgreSQL restarting,
   * a network cut) emits an 'error' nobody listens to, which ends the process. Here the error is
   * heard; the statement in flight, or the next one, fails with it anyway, and the connection is
   * given back as broken, so the pool drops it instead of handing it out again.
   */
  private async checkout(): Promise<{ client: pg.PoolClient; release: (failure?: Error) => void }> {
    const client = await this.pool.connect().catch((err: unknown) => { throw markConnectFailure(err) })
    let lost: Error | undefined
    const onError = (err: Error) => { lost = err }
    client.on('error', onError)
    return {
      client,
      release: (failure) => {
        client.removeListener('error', onError)
        client.release(failure ?? lost)
      },
    }
  }

  async copyLines(select: string, params: readonly unknown[]): Promise<Buffer[]> {
    this.onQuery?.(select)
    // A connection that broke mid-COPY is dropped, not handed to the next request.
    return this.onConnection((client) => copyLines(client, select, params))
  }

  /** Transactions run again after a deadlock or serialization failure (store/retry.ts). */
  transientRetries = 0

  /**
   * `fn` may run more than once: after a deadlock or a serialization failure the transaction is
   * rolled back and run again from the start (a few times, see retryTransient), so `fn` must do
   * nothing outside the transaction that cannot be repeated.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return retryTransient(() => this.transactionOnce(fn, options), () => { this.transientRetries++ })
  }

  private async transactionOnce<T>(fn: (tx: Tx) => Promise<T>, options: TransactionOptions): Promise<T> {
    const { client, release } = await this.checkout()
    const committed: (() => void)[] = []
    const tx: Tx = {
      kind: this.kind,
      query: async <R>(sql: string, params: readonly unknown[] = []) => {
        if (!sql.startsWith(BACKGROUND_SQL)) this.onQuery?.(sql)
        const res = await client.query(sql, params as unknown[])
        return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 }
      },
      afterCommit: (hook) => void committed.push(hook),
    }
    let failure: Error | undefined
    try {
      await client.query('BEGIN')
      const result = await fn(tx)
      // Sent now, the COMMIT is left to finish by a shutdown past its timeout (interrupt).
      this.committing.add(client)
      options.onCommit?.()
      await client.query('COMMIT')
      runCommitted(committed)
      return result
    } catch (err) {
      // A connection that broke or stopped answering (answerTimeoutMs) is dropped, not rolled
      // back: a ROLLBACK would wait behind the statement without an answer, and the connection,
      // given back, would hold the next request's statements behind it. The server rolls the
      // transaction back when the connection ends.
      if (isStoreUnreachable(err)) failure = err as Error
      else await client.query('ROLLBACK').catch((rollbackFailed: unknown) => { failure = rollbackFailed as Error })
      throw err
    } finally {
      this.committing.delete(client)
      release(failure)
    }
  }

  async listen(channel: string, onMessage: (payload: string) => void, events?: ListenEvents): Promise<void> {
    if (!/^[a-z_]+$/.test(channel)) throw new Error(`bad channel name ${channel}`)
    const list = this.handlers.get(channel) ?? []
    list.push(onMessage)
    this.handlers.set(channel, list)
    if (events) this.listenEvents.push(events)
    if (!this.listener && !this.reconnecting) this.listener = await this.connectListener()
    if (list.length === 1 && this.listener) await this.listener.query(`LISTEN ${channel}`)
  }

  /** The backend process id of the listening connection (tests terminate it), or null while it is down. */
  get listenerProcessId(): number | null {
    return (this.listener as (pg.Client & { processID?: number }) | null)?.processID ?? null
  }

  private listenEvents: ListenEvents[] = []
  private reconnecting: NodeJS.Timeout | null = null
  private closed = false

  /** A connection that LISTENs on every channel subscribed so far, and reconnects when it drops. */
  private async connectListener(): Promise<pg.Client> {
    const client = new pg.Client(this.config)
    client.on('notification', (msg) => {
      for (const handler of this.handlers.get(msg.channel) ?? []) handler(msg.payload ?? '')
    })
    let dropped = false
    const drop = (err: unknown) => {
      if (dropped || this.closed) return
      dropped = true
      if (this.listener === client) this.listener = null
      client.end().catch(() => undefined)
      this.scheduleReconnect(err, LISTEN_RETRY_FIRST_MS)
    }
    client.on('error', drop)
    client.on('end', () => drop(new Error('the listening connection ended')))
    try {
      await client.connect()
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`)
    } catch (err) {
      dropped = true
      await client.end().catch(() => undefined)
      throw err
    }
    return client
  }

  private scheduleReconnect(err: unknown, delayMs: number): void {
    if (this.closed || this.reconnecting) return
    for (const e of this.listenEvents) e.lost?.(err, delayMs)
    this.reconnecting = setTimeout(() => {
      this.reconnecting = null
      if (this.closed) return
      this.connectListener().then(
        (client) => {
          if (this.closed) return void client.end().catch(() => undefined)
          this.listener = client
          for (const e of this.listenEvents) e.reconnected?.()
        },
        (next: unknown) => this.scheduleReconnect(next, Math.min(LISTEN_RETRY_MAX_MS, delayMs * 2)),
      )
    }, delayMs)
    this.reconnecting.unref()
  }

  /**
   * Other processes learn of the change through LISTEN; this process applies it at once, so its
   * next request never sees what it has just changed in a stale state.
   */
  async notify(channel: string, payload: string): Promise<void> {
    for (const handler of this.handlers.get(channel) ?? []) handler(payload)
    await this.query('SELECT pg_notify($1, $2)', [channel, payload])
  }

  /**
   * Ending a busy connection alone is not enough: a backend waiting for a lock reads nothing from
   * its client until the lock is released, and would then run an autocommitted statement all the
   * same. So its statement is cancelled too (`pg_cancel_backend`, from a connection of its own,
   * given 1 s to connect); once cancelled, the backend finds its client gone and rolls back.
   * A connection whose COMMIT is under way is left to it: its request has changed the data and
   * gets its answer.
   */
  async interrupt(): Promise<void> {
    const clients = [...this.busy].filter((client) => !this.committing.has(client))
    if (clients.length === 0) return
    const pids = clients.map((c) => (c as pg.PoolClient & { processID?: number }).processID).filter((pid) => pid !== undefined)
    // With an active statement pg destroys the socket at once; else it says goodbye (the
    // backend then rolls back an open transaction).
    for (const client of clients) void client.end().catch(() => undefined)
    const canceller = new pg.Client({ ...this.config, connectionTimeoutMillis: 1_000 })
    canceller.on('error', () => undefined)
    try {
      await canceller.connect()
      await canceller.query('SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid', [pids])
    } finally {
      await canceller.end().catch(() => undefined)
    }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.reconnecting) clearTimeout(this.reconnecting)
    await this.listener?.end().catch(() => undefined)
    await this.pool.end()
  }
}

/**
 * Opens and closes one connection to PostgreSQL within `timeoutMs`, so that a server that takes
 * the connection and never answers (a firewall, a stopped VM, a wrong port) is told at once
 * instead of leaving the first statement waiting without end. Only when the store is opened: a
 * connect timeout on the pool would also time out requests queued for a busy pool's connections.
 */
export async function reachPostgres(databaseUrl: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: timeoutMs })
  client.on('error', () => undefined)
  const started = performance.now()
  try {
    await client.connect()
  } catch (err) {
    // pg ends the attempt at the deadline with an error of no code ("timeout expired"): told by
    // that and the time it took (a timer may fire a little early against this clock).
    if ((err as { code?: unknown }).code === undefined && performance.now() - started >= timeoutMs * 0.9) {
      throw Object.assign(new Error(`no answer within ${timeoutMs / 1000} s (KBIS_CONNECT_TIMEOUT_MS)`), { code: 'ETIMEDOUT' })
    }
    throw err
  }
  await client.end().catch(() => undefined)
}

/**
 * Triggers fire on the service's connections. Only a superuser may set session_replication_role
 * (to any value), so it is set only when it is not `origin` already; where it cannot be, the
 * connection fails with what to change rather than write rows its triggers never see.
 */
const ORIGIN_REPLICATION_ROLE = `DO $$BEGIN
  IF current_setting('session_replication_role') <> 'origin' THEN
    BEGIN
      SET session_replication_role = origin;
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE EXCEPTION 'session_replication_role is % for this role or database, and kbis needs origin: its triggers keep the typed projection and the counts (ALTER ROLE … RESET session_replication_role, or ALTER DATABASE … RESET session_replication_role, as it was set)', current_setting('session_replication_role');
    END;
  END IF;
END$$`

/** A store on the PostgreSQL server of `options.databaseUrl` (its pool not connected yet). */
export function openPostgres(options: StoreOptions & { databaseUrl: string }): Db {
  const config: pg.PoolConfig = {
    connectionString: options.databaseUrl,
    max: options.poolSize ?? 10,
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
  }
  const cost = options.parallelSetupCost
  if (cost !== undefined && (!Number.isFinite(cost) || cost < 0)) throw new Error(`parallelSetupCost: a cost of 0 or more, got ${cost}`)
  // Whatever the database or role sets: timestamps in the ISO style (`ALTER DATABASE … SET
  // datestyle = 'SQL, DMY'` made pg read `12/01/2026 11:53:37 UTC` as no date, and records
  // answered `"created_at": ""`), string literals as the SQL standard reads them (the service's
  // `ESCAPE '\'` is a syntax error under standard_conforming_strings = off), and the planner's
  // parallel_setup_cost when configured (decision 0019). And triggers that fire: a role or database
  // with session_replication_role = replica turned them off, and with them the typed projection
  // and the live counts (search, analytics and totals silently missed every asset written so).
  const settings = ['SET DateStyle = ISO', 'SET standard_conforming_strings = on', ORIGIN_REPLICATION_ROLE, ...(cost !== undefined ? [`SET parallel_setup_cost = ${cost}`] : [])].join('; ')
  const poolConfig: pg.PoolConfig = {
    ...config,
    ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.answerTimeoutMs ? { query_timeout: options.answerTimeoutMs } : {}),
    // Set on each new connection before the pool hands it out (pg-pool awaits the hook): startup
    // `options` would be replaced by any `options` the URL carries.
    onConnect: async (client: pg.ClientBase) => { await client.query(settings) },
  }
  // The connect timeout bounds opening a connection only, in the client: pg-pool's own
  // `connectionTimeoutMillis` also bounds the wait for a free pooled connection, with the same
  // error, so a replica busy with as many reads as its pool holds looked unreachable.
  const connectWithin = options.connectTimeoutMs
  if (connectWithin) {
    poolConfig.Client = class extends pg.Client {
      constructor(clientConfig?: pg.ClientConfig) {
        super({ ...clientConfig, connectionTimeoutMillis: connectWithin })
      }
    }
  }
  const pool = new pg.Pool(poolConfig)
  pool.on('error', () => undefined)
  // The LISTEN connection gives up opening at the same bound, and reconnects with back-off: one
  // opened to a server that never answered it would otherwise wait (and miss notifications) for good.
  return new PostgresDb(pool, connectWithin ? { ...config, connectionTimeoutMillis: connectWithin } : config)
}
