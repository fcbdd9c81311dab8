import { createHash } from 'node:crypto'
import pg from 'pg'
import { copyLines } from './copy.js'
import { createDataDir, initPgliteDataDir } from './pglite-init.js'
import { writeDataDirArchive, type BackupReport } from './backup.js'
import { lockDataDir, type DataDirLock } from './pglite-lock.js'
import { PgliteThread } from './pglite-thread.js'
import type { PgliteRows } from './pglite-worker.js'
import { retryTransient } from './retry.js'
import { parseJsonTimestamptz, parseTimestamptz } from './timestamps.js'

export interface QueryResult<R> {
  rows: R[]
  rowCount: number
}

/** Anything that runs parameterized SQL: the store itself or an open transaction. */
export interface QueryOptions {
  /**
   * Name of a prepared statement, for hot statements whose text never changes: PostgreSQL parses
   * it once per connection and, after a few runs, reuses a generic plan instead of planning every
   * execution over every index of the table. PGlite runs the text as usual.
   *
   * `true`: a statement generated per request whose text repeats (a list's or a search's page):
   * prepared under a name derived from its text, so that each connection parses and analyses it
   * once (decision 0021: parsing the documents a page's statement builds was ≈ 15 % of its
   * server time). PostgreSQL still plans it with each request's values.
   *
   * Either way: its result columns must not depend on the tables' columns (no `*`), and a
   * connection holds at most {@link PREPARED_PER_CONNECTION} prepared statements.
   */
  prepare?: string | true
  /**
   * A read (a SELECT, nothing else) whose rows the store may hand over as one JSON document,
   * with the names of its timestamptz columns (JSON carries them as text; they come back as the
   * same Dates as from a row). Only for columns whose JSON form is the driver's value: text,
   * uuid, jsonb, text[], boolean, integer, timestamptz (not bigint, numeric, date). PGlite's
   * protocol reader copies every field into a buffer of its own: a page of 100 assets (700
   * fields) took twice as long as the same rows as one `json_agg` text read by JSON.parse.
   * PostgreSQL runs the statement as it is: there the server builds the JSON, and a page read
   * by one client took about 30 % longer than pg's row parser (throughput under load was within
   * the noise), so rows stay rows.
   */
  jsonRows?: { readonly timestamps: readonly string[] }
  /**
   * The statement's rows are one column, `doc`: JSON text the store wrote (which holds no raw
   * line break: JSON escapes them in strings). PGlite hands them over as one text, the documents
   * joined by line breaks, for the reason above; PostgreSQL as rows.
   */
  docRows?: boolean
}

export interface Queryable {
  /** The backend; writers of events ask it whether positions are drawn as they write (outbox/write.ts). */
  readonly kind: StoreKind
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<QueryResult<R>>
}

/** An open transaction. */
export interface Tx extends Queryable {
  /**
   * Runs `fn` once the transaction has committed (never after a rollback, nor for an attempt
   * that a deadlock retry replaced): for in-process state that must follow committed data only.
   */
  afterCommit(fn: () => void): void
}

/** Runs the hooks a committed transaction collected; one failing hook does not stop the others. */
function runCommitted(hooks: readonly (() => void)[]): void {
  for (const fn of hooks) {
    try {
      fn()
    } catch {
      // A hook only updates caches of this process; the commit stands whatever it does.
    }
  }
}

export type StoreKind = 'postgres' | 'pglite'

/** Called before every statement; tests count statements through it (the N+1 guard). */
export type QueryHook = (sql: string) => void

/**
 * Prefix of statements that belong to background work, not to any request (the event relay,
 * publication): the query hook does not see them, so a request's statement count stays its own.
 */
export const BACKGROUND_SQL = '/* background */ '

/**
 * One store over either backend. Both speak the same SQL dialect (PGlite is PostgreSQL in WASM);
 * nothing above this file knows which one it has.
 */
export interface Db extends Queryable {
  readonly kind: StoreKind
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>
  /**
   * Subscribes to a notification channel (PostgreSQL LISTEN); a no-op store-wide on PGlite. On
   * PostgreSQL the listening connection reconnects by itself when it drops; notifications sent
   * meanwhile are lost, so `events.reconnected` runs after each reconnection (reload what the
   * notifications keep fresh) and `events.lost` when the connection drops (log it).
   */
  listen(channel: string, onMessage: (payload: string) => void, events?: ListenEvents): Promise<void>
  notify(channel: string, payload: string): Promise<void>
  close(): Promise<void>
  /**
   * PostgreSQL only (PGlite runs a statement in its thread to its end): cancels the statements
   * running now and ends their connections, so that their transactions roll back instead of
   * committing later, e.g. once a lock they wait for is released. For a shutdown past its timeout
   * (server.ts); the store stays open for what the shutdown still writes.
   */
  interrupt?(): Promise<void>
  onQuery: QueryHook | null
  /**
   * PostgreSQL only (absent on PGlite, whose COPY writes a whole file at once): the lines a
   * SELECT of one text column gives, as `COPY … TO STDOUT` writes them (store/copy.ts), each
   * ended by `\n`, in the chunks they arrived in. For reads whose rows the process only passes
   * on (the NDJSON export).
   */
  copyLines?(select: string, params: readonly unknown[]): Promise<Buffer[]>
  /**
   * PGlite on a data directory only (`kbis backup`): a copy of the directory as a tar archive,
   * taken while the store runs (store/backup.ts). PostgreSQL has its own backups (pg_dump,
   * pg_basebackup); an in-memory store has no directory.
   */
  backup?(file: string): Promise<BackupReport>
}

export interface ListenEvents {
  lost?(err: unknown, retryInMs: number): void
  reconnected?(): void
}

/** Back-off of the listening connection's reconnection: 250 ms, doubling, at most 5 s. */
const LISTEN_RETRY_FIRST_MS = 250
const LISTEN_RETRY_MAX_MS = 5_000

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

  constructor(readonly pool: pg.Pool, private readonly config: pg.PoolConfig) {
    pool.on('acquire', (client) => void this.busy.add(client))
    pool.on('release', (_err, client) => void this.busy.delete(client))
  }

  async query<R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}): Promise<QueryResult<R>> {
    if (!sql.startsWith(BACKGROUND_SQL)) this.onQuery?.(sql)
    if (options.prepare !== undefined) return this.queryPrepared<R>(options.prepare === true ? statementName(sql) : options.prepare, sql, params)
    const res = await this.pool.query(sql, params as unknown[])
    return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 }
  }

  /** QueryOptions.prepare: the statement under `name`, within PREPARED_PER_CONNECTION. */
  private async queryPrepared<R>(name: string, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
    const { client, release } = await this.checkout()
    let failure: Error | undefined
    try {
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
    } catch (err) {
      // As pool.query does, less a statement's own error: the connection itself is sound.
      if (!(err instanceof pg.DatabaseError)) failure = err as Error
      throw err
    } finally {
      release(failure)
    }
  }

  /**
   * A pooled connection for the caller's statements, and how to give it back. While a connection
   * is checked out pg-pool hears none of its errors: one that drops then (PostgreSQL restarting,
   * a network cut) emits an 'error' nobody listens to, which ends the process. Here the error is
   * heard; the statement in flight, or the next one, fails with it anyway, and the connection is
   * given back as broken, so the pool drops it instead of handing it out again.
   */
  private async checkout(): Promise<{ client: pg.PoolClient; release: (failure?: Error) => void }> {
    const client = await this.pool.connect()
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
    const { client, release } = await this.checkout()
    let failure: Error | undefined
    try {
      return await copyLines(client, select, params)
    } catch (err) {
      // A connection that broke mid-COPY is dropped, not handed to the next request.
      if (!(err instanceof pg.DatabaseError)) failure = err as Error
      throw err
    } finally {
      release(failure)
    }
  }

  /** Transactions run again after a deadlock or serialization failure (store/retry.ts). */
  transientRetries = 0

  /**
   * `fn` may run more than once: after a deadlock or a serialization failure the transaction is
   * rolled back and run again from the start (a few times, see retryTransient), so `fn` must do
   * nothing outside the transaction that cannot be repeated.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return retryTransient(() => this.transactionOnce(fn), () => { this.transientRetries++ })
  }

  private async transactionOnce<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
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
    try {
      await client.query('BEGIN')
      const result = await fn(tx)
      await client.query('COMMIT')
      runCommitted(committed)
      return result
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined)
      throw err
    } finally {
      release()
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
   */
  async interrupt(): Promise<void> {
    const clients = [...this.busy]
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

/** Runs one statement in the embedded store's thread, in transaction `tx` (0: none). */
type PgliteRun = (sql: string, params: readonly unknown[]) => Promise<{ rows: Record<string, unknown>[]; affectedRows: number }>

function pgliteRunner(thread: PgliteThread, tx: number): PgliteRun {
  return async (sql, params) => {
    const res = await thread.call({ op: 'query', tx, sql, params: params as unknown[] })
    return { rows: pgliteObjects(res), affectedRows: res.affectedRows }
  }
}

/** The rows as objects, as pg gives them (a later column wins a repeated name); timestamptz parsed here, as pg does. */
function pgliteObjects({ columns, rows, timestamps, timestampArrays }: PgliteRows): Record<string, unknown>[] {
  return rows.map((values) => {
    for (const i of timestamps) {
      const value = values[i]
      if (typeof value === 'string') values[i] = parseTimestamptz(value)
    }
    for (const i of timestampArrays) {
      const value = values[i]
      if (Array.isArray(value)) values[i] = value.map((v: unknown) => (typeof v === 'string' ? parseTimestamptz(v) : v))
    }
    const row: Record<string, unknown> = {}
    for (let i = 0; i < columns.length; i++) row[columns[i]!] = values[i]
    return row
  })
}

/** One statement on PGlite (or one of its transactions); `jsonRows` as QueryOptions says. */
async function runPgliteStatement<R>(run: PgliteRun, hook: QueryHook | null, sql: string, params: readonly unknown[], options: QueryOptions): Promise<QueryResult<R>> {
  if (!sql.startsWith(BACKGROUND_SQL)) hook?.(sql)
  if (options.docRows === true) {
    // A plain subquery hands its rows to the aggregate in the order it produced them.
    const res = await run(`SELECT string_agg(kbis_rows.doc, E'\\n') AS docs FROM (${sql}) kbis_rows`, params)
    const docs = res.rows[0]?.docs as string | null | undefined
    const rows = docs === null || docs === undefined ? [] : docs.split('\n').map((doc) => ({ doc }))
    return { rows: rows as R[], rowCount: rows.length }
  }
  if (options.jsonRows === undefined) {
    const res = await run(sql, params)
    return { rows: res.rows as R[], rowCount: res.affectedRows }
  }
  // A plain subquery hands its rows to the aggregate in the order it produced them.
  const res = await run(`SELECT coalesce(json_agg(kbis_rows), '[]')::text AS rows FROM (${sql}) kbis_rows`, params)
  const rows = JSON.parse(res.rows[0]!.rows as string) as Record<string, unknown>[]
  const { timestamps } = options.jsonRows
  for (const row of rows) {
    for (const column of timestamps) {
      const value = row[column]
      if (typeof value === 'string') row[column] = parseJsonTimestamptz(value)
    }
  }
  return { rows: rows as R[], rowCount: rows.length }
}

/**
 * PGlite, in a thread of its own (store/pglite-thread.ts, decision 0025): a statement runs there
 * to its end while this thread reads, checks and answers other requests.
 */
class PgliteDb implements Db {
  readonly kind = 'pglite' as const
  onQuery: QueryHook | null = null
  private readonly handlers = new Map<string, ((payload: string) => void)[]>()
  private readonly run: PgliteRun

  readonly backup: ((file: string) => Promise<BackupReport>) | undefined

  /** `dir`: the data directory and `lock` the process's hold on it (store/pglite-lock.ts); null for an in-memory store. */
  constructor(private readonly thread: PgliteThread, dir: string | null, private readonly lock: DataDirLock | null) {
    this.run = pgliteRunner(thread, 0)
    this.backup = dir === null ? undefined : (file) => this.backupDataDir(dir, file)
  }

  /**
   * A checkpoint first (every change so far in the table files, so that opening the copy has
   * little write-ahead log to replay), then the files copied while PGlite is held: no
   * statement runs meanwhile (requests wait, as they do for any long statement), so the copy is
   * the directory at one moment between two statements, what a crash then would leave. A
   * transaction open at that moment (between its statements) is rolled back when the copy is
   * opened, as after a crash.
   */
  private async backupDataDir(dir: string, file: string): Promise<BackupReport> {
    const hold = await this.thread.hold()
    try {
      return await writeDataDirArchive(dir, file)
    } finally {
      await this.thread.call({ op: 'release', hold })
    }
  }

  async query<R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}): Promise<QueryResult<R>> {
    return runPgliteStatement(this.run, this.onQuery, sql, params, options)
  }

  /** Diagnostics (tests, the benchmark): the size of PGlite's WebAssembly memory, in bytes. */
  async wasmMemoryBytes(): Promise<number> {
    return (await this.thread.call({ op: 'memory' })) as number
  }

  /** The benchmark's bulk-load limit only: `COPY … FROM '/dev/blob'` of `data`, in PGlite's thread. */
  async copyFromBlob(sql: string, data: Blob): Promise<void> {
    await this.thread.call({ op: 'query', tx: 0, sql, params: [], blob: data })
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const committed: (() => void)[] = []
    const id = this.thread.begin()
    const run = pgliteRunner(this.thread, id)
    let result: T
    try {
      result = await fn({
        kind: this.kind,
        query: <R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}) => runPgliteStatement<R>(run, this.onQuery, sql, params, options),
        afterCommit: (hook) => void committed.push(hook),
      })
    } catch (err) {
      await this.thread.call({ op: 'end', tx: id, commit: false }).catch(() => undefined)
      throw err
    }
    await this.thread.call({ op: 'end', tx: id, commit: true })
    runCommitted(committed)
    return result
  }

  // One process owns a PGlite data directory, so notifications never leave the process:
  // they are delivered directly.
  async listen(channel: string, onMessage: (payload: string) => void): Promise<void> {
    const list = this.handlers.get(channel) ?? []
    list.push(onMessage)
    this.handlers.set(channel, list)
  }

  async notify(channel: string, payload: string): Promise<void> {
    for (const handler of this.handlers.get(channel) ?? []) handler(payload)
  }

  async close(): Promise<void> {
    try {
      await this.thread.close()
    } finally {
      this.lock?.release()
    }
  }
}

export interface StoreOptions {
  /** PostgreSQL connection string; when absent, PGlite is used. */
  databaseUrl?: string | undefined
  /** PGlite: called once the data directory is locked, before a new one is created (unpacked from the build's template, or initdb). */
  onInitialize?: ((dir: string) => void) | undefined
  /** PGlite data directory; `memory://` for an in-memory store. */
  dataDir?: string | undefined
  /** PostgreSQL schema to use (tests isolate each file in its own schema). */
  schema?: string | undefined
  poolSize?: number | undefined
  /** Give up connecting after this long (a replica that is down must not hold reads up). */
  connectTimeoutMs?: number | undefined
  /**
   * PostgreSQL: `statement_timeout` of every pooled connection, in ms (unset or 0: none). A
   * statement past it fails with SQLSTATE 57014 (→ 503 query_timeout). PGlite ignores it: it has
   * no timer inside its WASM build (tested: `SET statement_timeout` is accepted and never fires).
   */
  statementTimeoutMs?: number | undefined
  /**
   * PostgreSQL: `parallel_setup_cost` of every pooled connection (unset: the server's). PGlite
   * runs no parallel workers.
   */
  parallelSetupCost?: number | undefined
  /**
   * PGlite only: its buffer pool (`shared_buffers`) in MB; default DEFAULT_PGLITE_SHARED_BUFFERS_MB.
   * All of the pool is resident from the moment PGlite starts, whatever the data (measured:
   * decision 0015).
   */
  sharedBuffersMb?: number | undefined
  /** PGlite only: a dump of a data directory (`dumpDataDir`) to start from instead of an empty one. */
  loadDataDir?: Blob | undefined
}

/**
 * PGlite's buffer pool, in MB (PostgreSQL's and PGlite's own default is 128). Half of it keeps
 * 64 MB less resident in every embedded process; pages beyond it are read from the operating
 * system's file cache. Measured at 200,000 assets: list, search, deep pages and analytics within
 * the run-to-run noise of 128 MB; 32 MB was too small (a raw OFFSET scan over 200,000 rows went
 * from ≈ 50 ms to seconds). Decision 0015.
 */
export const DEFAULT_PGLITE_SHARED_BUFFERS_MB = 64

/**
 * PGlite's `maintenance_work_mem`, in MB (PostgreSQL's default is 64): the memory one index build
 * or VACUUM may take before it works on disk. WebAssembly memory never shrinks, so an index built
 * over 1,000,000 rows with 64 MB left PGlite 56 MB larger for good (128 → 184 MB; 300,000 rows:
 * +26 MB); with 16 MB it stayed at 128 MB and took no longer (2.9 against 3.4 s). The service
 * builds indexes when `kbis apply` gives a property `unique_key` on a filled type, and the
 * statistics keeper vacuums after large writes. Decision 0015, addendum.
 */
export const PGLITE_MAINTENANCE_WORK_MEM_MB = 16

/**
 * What the PostgreSQL planner is told a parallel plan costs to start (its own default is 1000),
 * on the service's connections. Launching a worker took ≈ 23 ms on the 2-core virtual machines
 * kbis is measured on, so with the default a scan of a 200,000-asset projection went parallel
 * and took twice as long as alone (≈ 90 against ≈ 48 ms); with this cost plans go parallel from
 * about 550,000 rows, where the workers measured faster. Decision 0019.
 */
export const DEFAULT_PG_PARALLEL_SETUP_COST = 6500

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

export async function openDb(options: StoreOptions): Promise<Db> {
  if (options.databaseUrl) {
    const config: pg.PoolConfig = {
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
      ...(options.connectTimeoutMs ? { connectionTimeoutMillis: options.connectTimeoutMs } : {}),
    }
    // The pool's connections only: the LISTEN connection (built from `config`) waits without end.
    const cost = options.parallelSetupCost
    if (cost !== undefined && (!Number.isFinite(cost) || cost < 0)) throw new Error(`parallelSetupCost: a cost of 0 or more, got ${cost}`)
    const poolConfig: pg.PoolConfig = {
      ...config,
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
      // Set on each new connection before the pool hands it out (pg-pool awaits the hook): startup
      // `options` would be replaced by any `options` the URL carries.
      ...(cost !== undefined ? { onConnect: async (client: pg.ClientBase) => { await client.query(`SET parallel_setup_cost = ${cost}`) } } : {}),
    }
    const pool = new pg.Pool(poolConfig)
    pool.on('error', () => undefined)
    return new PostgresDb(pool, config)
  }
  const dir = options.dataDir ?? './data'
  const settings = {
    startParams: ['-c', `shared_buffers=${options.sharedBuffersMb ?? DEFAULT_PGLITE_SHARED_BUFFERS_MB}MB`, '-c', `maintenance_work_mem=${PGLITE_MAINTENANCE_WORK_MEM_MB}MB`],
    loadDataDir: null,
  }
  if (dir === 'memory://') {
    return new PgliteDb(await PgliteThread.start({ ...settings, dataDir: null, loadDataDir: options.loadDataDir ?? null }), null, null)
  }
  // Held from before initdb to after close: no second process opens (or initializes) the directory.
  createDataDir(dir)
  const lock = lockDataDir(dir)
  try {
    await initPgliteDataDir(dir, options.onInitialize)
    return new PgliteDb(await PgliteThread.start({ ...settings, dataDir: dir }), dir, lock)
  } catch (err) {
    lock.release()
    throw err
  }
}
