/*
 * The embedded backend of the store (store/db-api.ts says what a store is): PGlite in a thread
 * of its own, on a data directory it locks, or in memory.
 */
import { accessSync, constants, readdirSync, realpathSync, type Dirent } from 'node:fs'
import path from 'node:path'
import { inspect } from 'node:util'
import { checkDataDir, createDataDir, initPgliteDataDir } from './pglite-init.js'
import { writeDataDirArchive, type BackupReport } from './backup.js'
import { lockDataDir, type DataDirLock } from './pglite-lock.js'
import { PgliteThread } from './pglite-thread.js'
import type { PgliteRows } from './pglite-worker.js'
import { parseJsonTimestamptz, parseTimestamptz } from './timestamps.js'
import { DEFAULT_PGLITE_SHARED_BUFFERS_MB, PGLITE_MAINTENANCE_WORK_MEM_MB } from './tuning.js'
import { BACKGROUND_SQL, runCommitted, type Db, type QueryHook, type QueryOptions, type QueryResult, type StoreOptions, type TransactionOptions, type Tx } from './db-api.js'

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

  /** The benchmark's bulk-load limit only: `COPY … FROM '/dev/blob'` of `data`, in PGlite's thread, which takes the bytes over. */
  async copyFromBlob(sql: string, data: ArrayBuffer): Promise<void> {
    await this.thread.call({ op: 'query', tx: 0, sql, params: [], blob: data })
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const committed: (() => void)[] = []
    const serial = ++this.transactions
    // Cut off by a shutdown past its timeout (interrupt): no further statement, no commit.
    const goOn = (): void => {
      // 57P01 (admin_shutdown), as PostgreSQL ends a backend at shutdown: the store went away
      // under the request (503), not a fault of the request or of the code (500).
      if (serial <= this.interruptedThrough) throw Object.assign(new Error('the transaction was cut off by the shutdown timeout (KBIS_SHUTDOWN_TIMEOUT) and rolled back'), { code: '57P01' })
    }
    const id = this.thread.begin()
    const run = pgliteRunner(this.thread, id)
    let result: T
    try {
      result = await fn({
        kind: this.kind,
        query: <R>(sql: string, params: readonly unknown[] = [], options: QueryOptions = {}) => {
          goOn()
          return runPgliteStatement<R>(run, this.onQuery, sql, params, options)
        },
        afterCommit: (hook) => void committed.push(hook),
      })
      goOn()
    } catch (err) {
      await this.thread.call({ op: 'end', tx: id, commit: false }).catch(() => undefined)
      throw err
    }
    // From here an interrupt no longer stops it: it commits, and its request gets its answer.
    options.onCommit?.()
    await this.thread.call({ op: 'end', tx: id, commit: true })
    runCommitted(committed)
    return result
  }

  /** Transactions begun so far, and the last one a shutdown cut off (see interrupt). */
  private transactions = 0
  private interruptedThrough = 0

  /**
   * A shutdown past its timeout: every transaction begun so far rolls back instead of committing
   * (nothing a cut-off client sent commits later). PGlite cannot stop a statement it is running:
   * that one runs to its end, then its transaction runs no further statement. A transaction whose
   * commit was sent commits. Transactions begun afterwards (what the shutdown itself writes) run as usual.
   */
  async interrupt(): Promise<void> {
    this.interruptedThrough = this.transactions
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

/** A store on embedded PGlite: on `options.dataDir` (default ./data, created when missing) or in memory (`memory://`). */
export async function openPglite(options: StoreOptions): Promise<Db> {
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
    await options.whenLocked?.(dir)
    checkDataDir(dir, options.existingOnly === true)
    await initPgliteDataDir(dir, options.onInitialize)
    // PGlite opens a directory reached through a symbolic link (a data directory linked to a
    // mounted volume) as none it can use: it is given the directory the link names.
    const thread = await PgliteThread.start({ ...settings, dataDir: realpathSync(dir) }, options.onBooting).catch((err: unknown) => {
      throw new Error(cannotOpen(dir, err))
    })
    return new PgliteDb(thread, dir, lock)
  } catch (err) {
    lock.release()
    throw err
  }
}

/**
 * Why a data directory that exists would not open, for the operator: the embedded PostgreSQL's
 * own words are Emscripten's ("Aborted(). Build with -sASSERTIONS for more info.") and name
 * neither the directory nor the usual causes, a file this user may not write (a directory copied
 * by another user) or one missing (an archive unpacked in part).
 */
function cannotOpen(dir: string, err: unknown): string {
  const said = describeFailure(err).replace(/\.?\s*Build with -sASSERTIONS for more info\.?/, '').trim()
  const reason = /^Aborted\(/.test(said) ? 'the embedded PostgreSQL aborted' : said
  const locked = firstInaccessibleFile(dir)
  const cause = locked !== null
    ? `${locked} cannot be read and written by this user`
    : 'every file in it must be readable and writable by this user, and a directory restored from a backup unpacked whole (kbis backup)'
  return `cannot open the PGlite data directory ${dir} (${reason}): ${cause}`
}

/** What PGlite threw, in words: it throws Errors, and also plain objects (`[object Object]` as a string). */
function describeFailure(err: unknown): string {
  if (err instanceof Error) return err.message
  const message = (err as { message?: unknown } | null)?.message
  return typeof message === 'string' ? message : inspect(err, { breakLength: Infinity, depth: 1 })
}

function firstInaccessibleFile(dir: string): string | null {
  const pending = [dir]
  while (pending.length > 0) {
    const current = pending.pop()!
    let entries: Dirent[]
    try {
      accessSync(current, constants.R_OK | constants.W_OK | constants.X_OK)
      entries = readdirSync(current, { withFileTypes: true })
    } catch {
      return current
    }
    for (const entry of entries) {
      const file = path.join(current, entry.name)
      if (entry.isDirectory()) pending.push(file)
      else {
        try {
          accessSync(file, constants.R_OK | constants.W_OK)
        } catch {
          return file
        }
      }
    }
  }
  return null
}
