/*
 * What a store is, whatever its backend: the interfaces every other module of kbis talks to
 * (store/db.ts opens one; store/postgres-db.ts and store/pglite-db.ts are the two backends).
 */
import type { BackupReport } from './backup.js'

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

/** How a transaction runs. */
export interface TransactionOptions {
  /**
   * Called as the store sends COMMIT, once nothing in kbis stops the commit any more (a shutdown
   * past its timeout, {@link Db.interrupt}, no longer rolls it back): the request the transaction
   * serves has changed the data, so its answer is owed (core/cut-off.ts).
   */
  onCommit?: () => void
}

/** `store` with its transactions run by `transaction`; everything else is the store's own. */
export function withTransactions(store: Db, transaction: Db['transaction']): Db {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'transaction') return transaction
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    },
  })
}

/** Runs the hooks a committed transaction collected; one failing hook does not stop the others. */
export function runCommitted(hooks: readonly (() => void)[]): void {
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
  transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T>
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
   * For a shutdown past its timeout (server.ts): the transactions in flight roll back instead of
   * committing later. PostgreSQL cancels the statements running now and ends their connections
   * (one waiting for a lock would otherwise commit once the lock is released); PGlite, which runs
   * a statement in its thread to its end, lets those transactions run no further statement nor
   * commit. A transaction already committing (TransactionOptions.onCommit called) commits on
   * either store. The store stays open for what the shutdown still writes.
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

export interface StoreOptions {
  /** PostgreSQL connection string; when absent, PGlite is used. */
  databaseUrl?: string | undefined
  /** PGlite: called once the data directory is locked, before a new one is created (unpacked from the build's template, or initdb). */
  onInitialize?: ((dir: string) => void) | undefined
  /**
   * PGlite: called when PGlite starts booting in its thread, off the caller's thread for about a
   * second: a caller with other work (`kbis serve` loading the app) may do it meanwhile.
   */
  onBooting?: (() => void) | undefined
  /** PGlite data directory; `memory://` for an in-memory store. */
  dataDir?: string | undefined
  /** PGlite: refuse a data directory that holds no store, rather than create one there (store/pglite-init.ts checkDataDir). */
  existingOnly?: boolean | undefined
  /** PGlite: called once the data directory is locked, before anything in it is read; throwing refuses it (unlocked again). */
  whenLocked?: ((dir: string) => Promise<void>) | undefined
  /** PostgreSQL schema to use (tests isolate each file in its own schema). */
  schema?: string | undefined
  poolSize?: number | undefined
  /** Give up opening a connection after this long (a replica that is down must not hold reads up; a server that takes connections and never answers them must not hold requests or the LISTEN connection). */
  connectTimeoutMs?: number | undefined
  /**
   * PostgreSQL: `statement_timeout` of every pooled connection, in ms (unset or 0: none). A
   * statement past it fails with SQLSTATE 57014 (→ 503 query_timeout). PGlite ignores it: it has
   * no timer inside its WASM build (tested: `SET statement_timeout` is accepted and never fires).
   */
  statementTimeoutMs?: number | undefined
  /**
   * PostgreSQL: a statement whose answer has not come after this long fails on the client's side
   * ("Query read timeout": the store counts as unreachable) and its connection is dropped. For a
   * server that stopped answering, where its own `statement_timeout` cannot fire (the replica,
   * and the primary as the commands open it: open-store.ts).
   */
  answerTimeoutMs?: number | undefined
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
  /** PGlite only: the bytes of a data directory's dump (`dumpDataDir`, a tar file) to start from instead of an empty one. */
  loadDataDir?: Uint8Array | undefined
}
