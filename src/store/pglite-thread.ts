/**
 * The service's end of the embedded store's thread (store/pglite-worker.ts, decision 0025): one
 * worker thread that holds PGlite, asked through numbered messages. Each call is answered once;
 * while a call waits, the service's thread is free for other requests.
 */
import { readFileSync, statSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { PgliteFailure, PgliteReply, PgliteRequest, PgliteRows, PgliteWorkerOptions } from './pglite-worker.js'

type Call = PgliteRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never

// From dist/ the worker is the compiled file. From the sources (vitest, tsx) it is dist's copy when
// that was compiled from the source as it is now (the tests build dist/ first), else the
// TypeScript file, imported through tsx's API (on Node 20 a worker does not take tsx's loader from
// `execArgv`), which costs each thread ≈ 0.3 s of start: the tests start hundreds.
const FROM_SOURCES = import.meta.url.endsWith('.ts')

function compiledWorker(): URL {
  const compiled = new URL('../../dist/store/pglite-worker.js', import.meta.url)
  const source = new URL('./pglite-worker.ts', import.meta.url)
  try {
    if (statSync(compiled).mtimeMs >= statSync(source).mtimeMs) return compiled
  } catch {
    // No dist/ yet.
  }
  return source
}

/**
 * The thread's young generation, in MB. Its objects live for one message (a statement's
 * parameters and rows), so a small one costs little collecting; V8's default let the thread's
 * heap add ≈ 20 MB to the peak RSS of a PGlite service taking 10,000-item bulks (decision 0025).
 */
const YOUNG_GENERATION_MB = 4

function newWorker(options: PgliteWorkerOptions, transferList: ArrayBuffer[]): Worker {
  const settings = { workerData: options, transferList, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } }
  const file = FROM_SOURCES ? compiledWorker() : new URL('./pglite-worker.js', import.meta.url)
  if (file.pathname.endsWith('.js')) return new Worker(file, settings)
  // tsx's ESM entry of its API, as its package.json exports it (require.resolve gives the CommonJS one).
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json')
  const entry = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports['./esm/api']!.import.default
  const tsx = pathToFileURL(path.join(path.dirname(manifest), entry)).href
  return new Worker(`import(${JSON.stringify(tsx)}).then(({ tsImport }) => tsImport(${JSON.stringify(file.href)}, ${JSON.stringify(file.href)}))`, { ...settings, eval: true })
}

/** An error that PGlite raised in its thread, with PostgreSQL's fields (code, constraint, detail…) as they were. */
function revive(failure: PgliteFailure): Error {
  const err = new Error(failure.message)
  Object.assign(err, failure.fields)
  return err
}

const PGLITE_DIST = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'))

let compiled: Promise<WebAssembly.Module> | null = null

/** `bytes` as an ArrayBuffer of their own, to transfer (readFile's is its own unless the file is small). */
function ownBuffer(bytes: Uint8Array): ArrayBuffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer) return bytes.buffer
  return new Uint8Array(bytes).buffer
}

/**
 * PGlite's WebAssembly module and file-system bundle for a new thread. The module is compiled
 * once per process and shared by every thread of it (a compiled module crosses to a worker
 * without being compiled again), instead of each thread compiling its own (≈ 0.3 s per store,
 * which the tests, opening a store per file, paid hundreds of times). The bundle (6 MB) is read
 * for each thread, moved to it and not kept: a server starts one, which unpacks it into its own
 * file system.
 */
async function pgliteFiles(): Promise<Pick<PgliteWorkerOptions, 'pgliteWasmModule' | 'fsBundle'>> {
  if (compiled === null) {
    compiled = readFile(path.join(PGLITE_DIST, 'pglite.wasm')).then((wasm) => WebAssembly.compile(wasm))
    // A failed compile is tried again by the next thread.
    compiled.catch(() => {
      compiled = null
    })
  }
  const [pgliteWasmModule, bundle] = await Promise.all([compiled, readFile(path.join(PGLITE_DIST, 'pglite.data'))])
  return { pgliteWasmModule, fsBundle: ownBuffer(bundle) }
}

export class PgliteThread {
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void }>()
  private nextId = 1
  private stopped: Error | null = null

  private constructor(private readonly worker: Worker) {
    worker.on('message', (reply: PgliteReply) => {
      const call = this.pending.get(reply.id)
      if (call === undefined) return
      this.pending.delete(reply.id)
      // Only a call in flight keeps the process alive: a command that has its answer may exit.
      if (this.pending.size === 0) worker.unref()
      if (reply.ok) call.resolve(reply.value)
      else call.reject(revive(reply.error))
    })
    const stop = (err: Error): void => {
      this.stopped ??= err
      for (const call of this.pending.values()) call.reject(this.stopped)
      this.pending.clear()
    }
    worker.on('error', (err) => stop(new Error(`the embedded store stopped: ${err.message}`)))
    worker.on('exit', (code) => stop(new Error(`the embedded store stopped (its thread exited with code ${code})`)))
  }

  /** Starts the thread and PGlite in it (`onBooting` then); resolves once PGlite is ready. */
  static async start(options: Omit<PgliteWorkerOptions, 'pgliteWasmModule' | 'fsBundle' | 'loadDataDir'> & { loadDataDir: Uint8Array | null }, onBooting?: () => void): Promise<PgliteThread> {
    const files = await pgliteFiles()
    // A dump is copied (new Uint8Array: a Buffer's slice is a view) for the thread, which takes
    // the copy over; the caller's stays theirs (the tests load one into every store).
    const loadDataDir = options.loadDataDir === null ? null : new Uint8Array(options.loadDataDir).buffer
    const worker = newWorker({ ...options, ...files, loadDataDir }, [files.fsBundle, ...(loadDataDir === null ? [] : [loadDataDir])])
    const thread = new PgliteThread(worker)
    onBooting?.()
    try {
      // Answer 0 is the thread's "ready", or the error that kept PGlite from starting.
      await new Promise((resolve, reject) => thread.pending.set(0, { resolve, reject }))
    } catch (err) {
      await worker.terminate()
      throw err
    }
    worker.unref()
    return thread
  }

  call(request: Extract<Call, { op: 'query' }>): Promise<PgliteRows>
  call(request: Exclude<Call, { op: 'query' }>): Promise<unknown>
  call(request: Call): Promise<unknown> {
    return this.ask(this.nextId++, request)
  }

  /**
   * Opens a transaction in the thread and answers its id for `query` and `end` at once: the
   * thread takes messages in order, so its statements wait there for it to open.
   */
  begin(): number {
    if (this.stopped) throw this.stopped
    const id = this.nextId++
    this.worker.postMessage({ op: 'begin', id } satisfies PgliteRequest)
    return id
  }

  /** A checkpoint, then holds PGlite (no statement runs) until `release` names the answer. */
  async hold(): Promise<number> {
    const id = this.nextId++
    await this.ask(id, { op: 'hold' })
    return id
  }

  private ask(id: number, request: Call): Promise<unknown> {
    if (this.stopped) return Promise.reject(this.stopped)
    return new Promise((resolve, reject) => {
      try {
        // Throws at once for a value a structured clone cannot take (a function, a symbol). A
        // COPY's bytes are moved to the thread, not copied.
        const moved = request.op === 'query' && request.blob !== undefined ? [request.blob] : []
        this.worker.postMessage({ ...request, id } as PgliteRequest, moved)
      } catch (err) {
        return reject(err)
      }
      if (this.pending.size === 0) this.worker.ref()
      this.pending.set(id, { resolve, reject })
    })
  }

  /** Closes PGlite and ends the thread. */
  async close(): Promise<void> {
    if (this.stopped) return
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()))
    await this.call({ op: 'close' })
    // Alive until the thread has ended: the caller may wait for its close (Node keeps a process
    // only for what holds it).
    this.worker.ref()
    await exited
  }
}
