/**
 * The embedded store's own thread (decision 0025). PGlite runs every statement to its end on the
 * thread that calls it, so on the service's thread a 10,000-item bulk left every socket unread
 * for seconds. Here it runs in a worker thread: the service's thread parses, checks and answers
 * requests while a statement runs, and talks to PGlite through the messages below
 * (store/pglite-thread.ts is the other end). This file holds PGlite and nothing else of the service.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { PGlite, type Transaction } from '@electric-sql/pglite'

export interface PgliteWorkerOptions {
  /** The data directory (already initialized and locked by the service's thread), or null: in memory. */
  dataDir: string | null
  /** Added to PGlite's own start parameters. */
  startParams: string[]
  /** The bytes of a data directory's dump (`dumpDataDir`) to start from, or null; the thread's own (transferred). */
  loadDataDir: ArrayBuffer | null
  /** PGlite's WebAssembly module, compiled once per process, and its file-system bundle's bytes, transferred (store/pglite-thread.ts). */
  pgliteWasmModule: WebAssembly.Module
  fsBundle: ArrayBuffer
}

export type PgliteRequest =
  /** `blob`: the bytes of the file of a `COPY … FROM '/dev/blob'` (the benchmark's bulk-load limit). */
  | { id: number; op: 'query'; tx: number; sql: string; params: unknown[]; blob?: ArrayBuffer }
  /** Opens a transaction, whose id is this request's; not answered (see `begin` below). */
  | { id: number; op: 'begin' }
  /** Commits (or rolls back) transaction `tx`; answered once it has. */
  | { id: number; op: 'end'; tx: number; commit: boolean }
  /** A checkpoint, then no statement runs until `release` names this request (a backup's copy). */
  | { id: number; op: 'hold' }
  | { id: number; op: 'release'; hold: number }
  /** The size of PGlite's WebAssembly memory, in bytes (it grows and never shrinks). */
  | { id: number; op: 'memory' }
  | { id: number; op: 'close' }

/**
 * A statement's rows as arrays of values, in the order of `columns` (the objects are built on the
 * other side: a structured clone of objects writes every key of every row); `timestamps`: the
 * indexes of the columns that hold timestamptz text, and `timestampArrays` of arrays of it, for the
 * service's thread to parse.
 */
export interface PgliteRows {
  columns: string[]
  rows: unknown[][]
  affectedRows: number
  timestamps: number[]
  timestampArrays: number[]
}

/** An error as it crosses threads: its message and the fields PostgreSQL gave (code, constraint…). */
export interface PgliteFailure {
  message: string
  fields: Record<string, unknown>
}

export type PgliteReply = { id: number; ok: true; value?: PgliteRows | number } | { id: number; ok: false; error: PgliteFailure }

const TIMESTAMPTZ = 1184
const TIMESTAMPTZ_ARRAY = 1185

// What an error carries that the service does not need back: the statement and its parameters
// (a bulk's are megabytes).
const LEFT_BEHIND = new Set(['query', 'params', 'queryOptions', 'stack', 'message'])

function failure(err: unknown): PgliteFailure {
  if (!(err instanceof Error)) return { message: String(err), fields: {} }
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(err)) {
    if (!LEFT_BEHIND.has(key) && (value === undefined || value === null || typeof value !== 'object')) fields[key] = value
  }
  fields.name = err.name
  return { message: err.message, fields }
}

async function run(on: Pick<PGlite, 'query'>, sql: string, params: unknown[], blob: Blob | undefined): Promise<PgliteRows> {
  const res = await on.query<unknown[]>(sql, params, blob === undefined ? { rowMode: 'array' } : { rowMode: 'array', blob })
  const timestamps: number[] = []
  const timestampArrays: number[] = []
  res.fields.forEach((field, i) => {
    if (field.dataTypeID === TIMESTAMPTZ) timestamps.push(i)
    else if (field.dataTypeID === TIMESTAMPTZ_ARRAY) timestampArrays.push(i)
  })
  return { columns: res.fields.map((field) => field.name), rows: res.rows, affectedRows: res.affectedRows ?? res.rows.length, timestamps, timestampArrays }
}

const ROLLBACK = Symbol('rollback')

type Reply = (message: PgliteReply) => void

/**
 * PGlite (0.5) decodes each text value of a row with a TextDecoder made with the defaults, which
 * drop a leading U+FEFF (byte-order mark) as the start of a file's: a name stored as "\ufeffweb"
 * was read back "web" — in GET, CSV exports, and upserts that then called "web" unchanged — where
 * PostgreSQL (pg reads the bytes as they are) answered it whole. This thread holds PGlite and
 * nothing else, so its decoders all keep a BOM as any other character (`ignoreBOM`); PGlite makes
 * them when it starts, after this module has run.
 */
function keepByteOrderMarks(): void {
  const Plain = globalThis.TextDecoder
  globalThis.TextDecoder = class extends Plain {
    constructor(label?: string, options?: TextDecoderOptions) {
      super(label, { ...options, ignoreBOM: true })
    }
  }
}

keepByteOrderMarks()

/**
 * A Blob of bytes the thread already holds, for the options PGlite takes as a Blob and reads
 * with `arrayBuffer()` (its file-system bundle, a dump to load). Node 20 reads a Blob's bytes in
 * 64 kB pieces at ≈ 160 MB/s, and from the thread that made it when it crossed threads: the
 * tests' 40 MB dump took ≈ 0.25 s of each thread and as much of the service's thread, the bundle
 * (6 MB) 40 ms of each start.
 */
export class BytesBlob extends Blob {
  readonly #bytes: ArrayBuffer

  constructor(bytes: ArrayBuffer) {
    super([])
    this.#bytes = bytes
  }

  override get size(): number {
    return this.#bytes.byteLength
  }

  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(this.#bytes)
  }

  // PGlite (0.5.16) reads them with arrayBuffer() alone; read another way, they are the same bytes
  // (test/unit/store/bytes-blob.test.ts). Only within this thread: posted elsewhere, a BytesBlob
  // would cross as the empty Blob it is made from.
  override text(): Promise<string> {
    return Promise.resolve(new TextDecoder().decode(this.#bytes))
  }

  override slice(start?: number, end?: number, contentType?: string): Blob {
    return new Blob([this.#bytes]).slice(start, end, contentType)
  }

  override stream(): ReturnType<Blob['stream']> {
    return new Blob([this.#bytes]).stream()
  }
}

async function openPglite(options: PgliteWorkerOptions): Promise<PGlite> {
  const settings = {
    // timestamptz stays text: the service's thread parses it into Dates that keep their ISO text
    // (store/timestamps.ts), which a structured clone would drop.
    parsers: { [TIMESTAMPTZ]: (text: string) => text },
    startParams: [...PGlite.defaultStartParams, ...options.startParams],
    pgliteWasmModule: options.pgliteWasmModule,
    fsBundle: new BytesBlob(options.fsBundle),
  }
  const pglite =
    options.dataDir === null
      ? new PGlite(options.loadDataDir ? { ...settings, loadDataDir: new BytesBlob(options.loadDataDir) } : settings)
      : new PGlite(options.dataDir, settings)
  await pglite.waitReady
  return pglite
}

/**
 * The open transactions, by the id of the `begin` that opened each. A `begin` is not answered:
 * the statements that name the transaction wait for it to open (or fail with the error that kept
 * it from opening), and its `end` is answered once it has committed or rolled back. A transaction
 * costs its statements and its end, not one more round trip.
 */
class Transactions {
  private readonly open = new Map<number, { ready: Promise<Transaction>; end(commit: boolean, endId: number): void }>()

  constructor(private readonly pglite: PGlite, private readonly reply: Reply) {}

  begin(id: number): void {
    let finish: (commit: boolean) => void = () => undefined
    let done!: Promise<void>
    const ready = new Promise<Transaction>((opened, failed) => {
      done = this.pglite.transaction(
        (tx) =>
          new Promise<void>((commit, rollback) => {
            finish = (commits) => (commits ? commit() : rollback(ROLLBACK))
            opened(tx)
          }),
      )
      done.catch(failed)
    })
    ready.catch(() => undefined)
    this.open.set(id, {
      ready,
      end: (commit, endId) => {
        void ready.then(() => finish(commit), () => undefined)
        done
          .then(
            () => this.reply({ id: endId, ok: true }),
            (err: unknown) => (err === ROLLBACK || !commit ? this.reply({ id: endId, ok: true }) : this.fail(endId, err)),
          )
          .finally(() => this.open.delete(id))
      },
    })
  }

  /** Where a statement runs: outside any transaction (0), or in an open one (undefined: none such). */
  on(tx: number): Promise<Pick<PGlite, 'query'>> | undefined {
    return tx === 0 ? Promise.resolve(this.pglite) : this.open.get(tx)?.ready
  }

  end(tx: number, commit: boolean, endId: number): void {
    const open = this.open.get(tx)
    if (open === undefined) return this.fail(endId, new Error(`no open transaction ${tx}`))
    open.end(commit, endId)
  }

  fail(id: number, err: unknown): void {
    this.reply({ id, ok: false, error: failure(err) })
  }
}

async function main(port: NonNullable<typeof parentPort>, options: PgliteWorkerOptions): Promise<void> {
  const pglite = await openPglite(options)
  const reply: Reply = (message) => port.postMessage(message)
  const transactions = new Transactions(pglite, reply)
  const fail = (id: number, err: unknown): void => transactions.fail(id, err)
  // Holds (a backup's copy of the data directory): released by a later message.
  const held = new Map<number, () => void>()

  port.on('message', (message: PgliteRequest) => {
    switch (message.op) {
      case 'query': {
        const on = transactions.on(message.tx)
        if (on === undefined) return fail(message.id, new Error(`no open transaction ${message.tx}`))
        on.then((db) => run(db, message.sql, message.params, message.blob === undefined ? undefined : new BytesBlob(message.blob))).then((value) => reply({ id: message.id, ok: true, value }), (err: unknown) => fail(message.id, err))
        return
      }
      case 'begin':
        return transactions.begin(message.id)
      case 'end':
        return transactions.end(message.tx, message.commit, message.id)
      case 'hold':
        pglite
          .query('CHECKPOINT')
          .then(() =>
            pglite.runExclusive(
              () =>
                new Promise<void>((release) => {
                  held.set(message.id, release)
                  reply({ id: message.id, ok: true })
                }),
            ),
          )
          .catch((err: unknown) => fail(message.id, err))
        return
      case 'release':
        held.get(message.hold)?.()
        held.delete(message.hold)
        return reply({ id: message.id, ok: true })
      case 'memory':
        // PGlite keeps its Emscripten module to itself; its heap is the WebAssembly memory.
        return reply({ id: message.id, ok: true, value: (pglite as unknown as { mod: { HEAPU8: Uint8Array } }).mod.HEAPU8.length })
      case 'close':
        pglite.close().then(
          () => {
            reply({ id: message.id, ok: true })
            port.close()
          },
          (err: unknown) => fail(message.id, err),
        )
        return
    }
  })
  port.postMessage({ id: 0, ok: true } satisfies PgliteReply)
}

if (parentPort !== null) {
  const port = parentPort
  main(port, workerData as PgliteWorkerOptions).catch((err: unknown) => port.postMessage({ id: 0, ok: false, error: failure(err) } satisfies PgliteReply))
}
