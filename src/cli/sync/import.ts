import { createReadStream, createWriteStream, existsSync, statSync, type WriteStream } from 'node:fs'
import { once } from 'node:events'
import { randomUUID } from 'node:crypto'
import { stringify } from 'csv-stringify/sync'
import { errorsOf, ReachError, readAssetType, type ApiError, type ServerClient } from './client.js'
import { compositeKey, type AssetTypeInfo, type CellError } from './convert.js'
import { csvRows, ndjsonRows, type FileRow, type ReadProgress } from './rows.js'
import { createProgress, lostNote, type Progress } from './progress.js'
import { fsReason } from '../../store/write-whole.js'
import { outputProblem } from './export.js'
import { pushAll } from '../../core/arrays.js'

export const CHUNK_SIZE = 10_000

/** `1 row`, `2 rows`. */
export const rowCount = (n: number): string => `${n} row${n === 1 ? '' : 's'}`

export interface ImportOptions {
  /** A path, or `-` for standard input. */
  file: string
  /** By the file's extension when absent (`.ndjson`, `.jsonl`, `.json`: NDJSON; else CSV). */
  format?: 'csv' | 'ndjson' | undefined
  type: string
  upsert: boolean
  dryRun: boolean
  errors?: string | undefined
}

export interface ImportSummary {
  rows: number
  refused: number
  failedChunks: number
  /** Chunks that an earlier try wrote, whose answer the server lost (ApiAnswer.answerLost): what they hold is not known here. */
  lostChunks: number
  results: { created: number; updated: number; unchanged: number }
}

interface Refusal {
  line: number
  field: string
  message: string
}

/**
 * `/3/properties/purchased_on` → `purchased_on`; `/3/name` → `name`; the item itself → ''. An
 * upsert's `/3/id` (the composite key the import made of the row) → the unique key's column.
 */
function fieldOf(pointer: string | undefined, type: AssetTypeInfo): string {
  const parts = (pointer ?? '').split('/').slice(2)
  if (parts.length === 1 && parts[0] === 'id' && type.unique_property_key) return type.unique_property_key
  return (parts[0] === 'properties' ? parts.slice(1) : parts).join('.')
}

/**
 * The asset type, read from the server. Its 404 for a path it does not serve (a --url ending in
 * /api/v1 doubles it) is told from its 404 for a type it does not have.
 */
async function loadType(client: ServerClient, key: string): Promise<AssetTypeInfo> {
  const type = await readAssetType<AssetTypeInfo>(client, key)
  if (type === null) throw new Error(`unknown asset type ${key}`)
  return type
}

class ErrorReport {
  /** A write that failed (a full disk): said as one line at the next add or at close, never a crash. */
  private failure: Error | null = null

  private constructor(private readonly out: WriteStream | null, private readonly path = '') {
    out?.on('error', (err) => { this.failure ??= err })
  }

  static async open(path: string | undefined): Promise<ErrorReport> {
    if (!path) return new ErrorReport(null)
    const out = createWriteStream(path)
    try {
      await once(out, 'open')
    } catch (err) {
      throw new Error(`cannot write --errors ${path}: ${fsReason(err as Error)}`)
    }
    const report = new ErrorReport(out, path)
    out.write(stringify([['line', 'field', 'message']]))
    return report
  }

  private check(): void {
    if (this.failure) throw new Error(`cannot write --errors ${this.path}: ${fsReason(this.failure)}`)
  }

  async add(refusals: Refusal[]): Promise<void> {
    this.check()
    if (!this.out || refusals.length === 0) return
    if (!this.out.write(stringify(refusals.map((r) => [r.line, r.field, r.message])))) {
      await Promise.race([once(this.out, 'drain'), once(this.out, 'close')]).catch(() => undefined)
    }
    this.check()
  }

  private closing: Promise<void> | null = null

  /** Ends the file (once, whoever asks first: the run's end or an interruption's exit). */
  async close(): Promise<void> {
    const out = this.out
    if (!out) return
    this.closing ??= out.destroyed
      ? Promise.resolve()
      : (out.end(), Promise.race([once(out, 'finish'), once(out, 'close')]).then(() => undefined, () => undefined))
    await this.closing
    this.check()
  }
}

/** Whether `a` and `b` name one file (the second may not exist yet). */
function sameFile(a: string, b: string): boolean {
  if (!existsSync(b)) return false
  const [x, y] = [statSync(a), statSync(b)]
  return x.dev === y.dev && x.ino === y.ino
}

interface ChunkContext {
  client: ServerClient
  type: AssetTypeInfo
  options: ImportOptions
  runId: string
  /** Whether the server answers `?dry_run=true` on the bulk endpoint (asked once, when first needed). */
  dryRun: () => Promise<boolean>
  /**
   * A dry run creating (no --upsert): the unique-key values of the rows that earlier chunks would
   * have created, with their lines. The server checks each chunk alone, writing nothing, so it
   * cannot see that a later chunk's row takes a value an earlier one would have created by then:
   * the real import refuses that row (409), and the dry run must too.
   */
  created: Map<string, number> | null
}

/** The row's unique-key value when it is one (a string), else null. */
function uniqueValueOf(type: AssetTypeInfo, row: FileRow): string | null {
  const value = type.unique_property_key ? row.item?.properties[type.unique_property_key] : undefined
  return typeof value === 'string' ? value : null
}

/**
 * Asks the server whether its bulk endpoint knows `?dry_run=true` with an empty request, which
 * writes nothing either way: a server that ignored the parameter would write a real chunk.
 * Only two answers mean it does not: a success without `meta.dry_run` (the parameter ignored)
 * and a 400 naming the parameter (refused as unknown). Any other refusal (401, 403, a 429 still
 * there after the retries, a 500, …) is the server's word on the import itself, told as the real
 * import tells it; nothing can be sent while the answer to the question is unknown.
 */
async function probeDryRun(client: ServerClient, method: string): Promise<boolean> {
  const res = await client.json(method, '/api/v1/bulk/assets?dry_run=true', [])
  if (res.status >= 200 && res.status < 300) return (res.body as { meta?: { dry_run?: unknown } } | null)?.meta?.dry_run === true
  const errors = errorsOf(res.body)
  if (res.status === 400 && errors.some((e) => e.source?.parameter === 'dry_run')) return false
  throw new Error(`the server refused the import: ${errors[0]?.detail ?? `HTTP ${res.status}`}`)
}

/**
 * Sends one chunk as one bulk request (atomic on the server). Rows refused here already (a cell
 * that is not a number, …) keep the chunk from being written; it is then sent as a dry run, so
 * that the report also lists what the server would refuse, those rows included (with the cells
 * that converted).
 */
async function sendChunk(ctx: ChunkContext, rows: FileRow[], index: string): Promise<{ refusals: Refusal[]; failed: boolean; lost: boolean; results: ImportSummary['results']; note: string } | 'too large'> {
  const results = { created: 0, updated: 0, unchanged: 0 }
  const refusals: Refusal[] = rows.flatMap((r) => r.issues.map((i) => ({ line: r.line, ...i })))
  const items: Record<string, unknown>[] = []
  for (const row of rows) {
    if (row.item === null) continue
    const item: Record<string, unknown> = { client_ref: String(row.line), ...row.item }
    if (ctx.options.upsert) {
      try {
        item.id = compositeKey(ctx.type, row.item.properties)
      } catch (err) {
        for (const e of (err as AggregateError).errors as CellError[]) refusals.push({ line: row.line, field: e.field, message: e.message })
        continue
      }
    } else item.asset_type_key = ctx.type.key
    items.push(item)
    const value = ctx.created ? uniqueValueOf(ctx.type, row) : null
    const line = value === null ? undefined : ctx.created!.get(value)
    if (line !== undefined) {
      refusals.push({ line: row.line, field: ctx.type.unique_property_key!,
        message: `${ctx.type.key} ${value}: the unique value is already taken by another asset of this type (the one line ${line} of this file creates)` })
    }
  }
  // A chunk with rows refused here is not written; the server checks the rest as a dry run when it can.
  const dryRun = ctx.options.dryRun || refusals.length > 0
  // The server's reason when it refused the whole request, not items of it (a 503 still there
  // after the retries, a 500): the chunk's line says it, which --errors alone would otherwise hold.
  let whole = ''
  if (items.length > 0 && (!dryRun || (await ctx.dryRun()))) {
    const res = await ctx.client.json(ctx.options.upsert ? 'PUT' : 'POST', `/api/v1/bulk/assets${dryRun ? '?dry_run=true' : ''}`, items,
      { 'idempotency-key': `kbis-import-${ctx.runId}-${index}` })
    // A refusal of the request itself (a key without the right, a server without the route) stops
    // the import; a 403 that names items (the key's roles do not reach their access domain) is
    // about those rows only, reported like any refused row, and the next chunks go on.
    const errors = errorsOf(res.body)
    // An earlier try of this chunk (this run's, before its server restarted) wrote it, and the
    // server lost its answer: its rows are written, how (created, updated, unchanged) is not known.
    if (res.answerLost) {
      return { refusals, failed: false, lost: true, results, note: `${linesOf(rows)}: ${rowCount(rows.length)}, written by an earlier try whose answer the server lost (HTTP ${res.status}: ${errors[0]?.detail ?? 'idempotency_key_in_use'})` }
    }
    // Rows of long texts: 10,000 of them may pass the server's byte limit for a bulk body (8 MiB
    // by default) though each is valid; the caller sends the chunk again in halves.
    if (res.status === 413 && rows.length > 1) return 'too large'
    if ([401, 403, 404, 405].includes(res.status) && !errors.some((e) => e.meta?.client_ref)) {
      throw new Error(`the server refused the import: ${errors[0]?.detail ?? `HTTP ${res.status}`}`)
    }
    if (res.status >= 300) {
      if (!errors.some((e) => e.meta?.client_ref)) whole = ` (HTTP ${res.status}${errors[0]?.detail ? `: ${errors[0].detail}` : ''})`
      // A cell refused here was left out of its item: the server's word on that field (required, …) would repeat it.
      const local = new Map<number, Set<string>>()
      for (const r of refusals) local.set(r.line, (local.get(r.line) ?? new Set()).add(r.field))
      pushAll(refusals, refusalsOf(errors, rows, items, res.status, ctx.type).filter((r) => !local.get(r.line)?.has(r.field)))
    } else if (!dryRun) countResults(res.body, ctx.options.upsert, items.length, results)
  }
  const failed = refusals.length > 0
  if (ctx.created && !failed) {
    for (const row of rows) {
      const value = uniqueValueOf(ctx.type, row)
      if (value !== null) ctx.created.set(value, row.line)
    }
  }
  const written = failed || ctx.options.dryRun ? 'nothing written' : `${results.created} created, ${results.updated} updated, ${results.unchanged} unchanged`
  const note = `${linesOf(rows)}: ${rowCount(rows.length)}, ${failed ? `${new Set(refusals.map((r) => r.line)).size} refused, ` : ctx.options.dryRun ? 'all valid, ' : ''}${written}${whole}`
  return { refusals, failed, lost: false, results, note }
}

/** The file lines of a chunk, as its report names them: `lines 2-10001` (a row's last line: a quoted cell may span several). */
function linesOf(rows: readonly FileRow[]): string {
  return `lines ${rows[0]!.line}-${rows[rows.length - 1]!.lastLine}`
}

/**
 * Item errors name their row by client_ref (= line), and another item of the request by its
 * index (a clash's "… is given by item 3"), which is told as that item's line; the "item 0: "
 * that starts a schema error's detail is dropped, the report's line naming the row already. An
 * error of the whole request refuses every row.
 */
function refusalsOf(errors: ApiError[], rows: FileRow[], items: readonly Record<string, unknown>[], status: number, type: AssetTypeInfo): Refusal[] {
  const itemErrors = errors.filter((e) => e.meta?.client_ref)
  const lineOf = (e: ApiError) => e.detail
    .replace(/^item (\d+): /, (text, i: string) => (Number(i) === e.meta?.index ? '' : text))
    .replace(/ given by item (\d+)$/, (text, i: string) => (items[Number(i)] === undefined ? text : ` given by line ${items[Number(i)]!.client_ref as string}`))
  if (itemErrors.length > 0) return itemErrors.map((e) => ({ line: Number(e.meta!.client_ref), field: fieldOf(e.source?.pointer, type), message: lineOf(e) }))
  const message = errors[0]?.detail ?? `HTTP ${status}`
  return rows.map((r) => ({ line: r.line, field: '', message }))
}

function countResults(body: unknown, upsert: boolean, count: number, results: ImportSummary['results']): void {
  if (!upsert) {
    results.created += count
    return
  }
  for (const entry of (body as { data: { result: 'created' | 'updated' | 'unchanged' }[] }).data) results[entry.result]++
}

/** Whether `err` is an error of reading a file or stream (opening it included). */
function isReadError(err: unknown): err is NodeJS.ErrnoException {
  const { code, syscall } = err as NodeJS.ErrnoException
  return code !== undefined && (syscall === 'read' || syscall === 'open')
}

/** `kbis import` (CONTRACT §16): streams the file, sends chunks of up to 10,000 rows, reports refusals. */
export async function runImport(client: ServerClient, options: ImportOptions, progress?: Progress): Promise<ImportSummary> {
  const stdin = options.file === '-'
  const errorsProblem = options.errors ? outputProblem('--errors', options.errors) : null
  if (errorsProblem) throw new Error(errorsProblem)
  // Opening the report empties it: naming the file being imported would destroy it before it is read.
  if (options.errors && !stdin && existsSync(options.file) && sameFile(options.file, options.errors)) {
    throw new Error(`--errors ${options.errors} is the file being imported; name another file for the refused rows`)
  }
  // Emptied first: a run that stops before its rows (no such file, an unknown type, a key refused,
  // a server out of reach) leaves no refusals of an earlier run there, only the header.
  const report = await ErrorReport.open(options.errors)
  try {
    return await importRows(client, options, report, progress)
  } finally {
    await report.close()
  }
}

async function importRows(client: ServerClient, options: ImportOptions, report: ErrorReport, progress?: Progress): Promise<ImportSummary> {
  const stdin = options.file === '-'
  if (!stdin && !existsSync(options.file)) throw new Error(`no file ${options.file}`)
  if (!stdin && statSync(options.file).isDirectory()) throw new Error(`${options.file} is a directory, not a file`)
  const type = await loadType(client, options.type)
  if (options.upsert && !type.unique_property_key) throw new Error(`asset type ${type.key} has no unique_key property: --upsert needs one to name each asset`)
  const method = options.upsert ? 'PUT' : 'POST'
  let probe: Promise<boolean> | null = null
  const dryRun = () => (probe ??= probeDryRun(client, method))
  if (options.dryRun && !(await dryRun())) {
    throw new Error(`the server does not support dry runs (?dry_run=true on ${method} /api/v1/bulk/assets); nothing was sent`)
  }
  const ndjson = (options.format ?? (/\.(nd)?jsonl?$/i.test(options.file) ? 'ndjson' : 'csv')) === 'ndjson'
  const read: ReadProgress = { bytes: 0 }
  // Standard input has no size: the bar shows items and their rate, without a share or an ETA.
  const bar = progress ?? createProgress(stdin ? null : statSync(options.file).size, { beforeExit: () => report.close() })
  const ctx: ChunkContext = { client, type, options, runId: randomUUID(), dryRun, created: options.dryRun && !options.upsert && type.unique_property_key ? new Map() : null }
  const summary: ImportSummary = { rows: 0, refused: 0, failedChunks: 0, lostChunks: 0, results: { created: 0, updated: 0, unchanged: 0 } }
  let chunk: FileRow[] = []
  let index = 0
  // A chunk over the server's byte limit is sent as two, each atomic, and so on (`label`: its
  // Idempotency-Key's part, 3, then 3a and 3b, …).
  const send = async (rows: FileRow[], label: string): Promise<void> => {
    // A dry run writes nothing: an interruption then has nothing to say of the chunk in flight.
    const lines = linesOf(rows)
    if (!options.dryRun) bar.sending(lines)
    const sent = await sendChunk(ctx, rows, label).catch((err: unknown) => {
      // The server went away for good mid-import: say what it may hold, as an interruption does.
      throw err instanceof ReachError && !options.dryRun ? new Error(lostNote(err.message, lines)) : err
    })
    bar.sending(null)
    if (sent === 'too large') {
      const half = Math.ceil(rows.length / 2)
      await send(rows.slice(0, half), `${label}a`)
      return send(rows.slice(half), `${label}b`)
    }
    summary.rows += rows.length
    summary.refused += new Set(sent.refusals.map((r) => r.line)).size
    if (sent.failed) summary.failedChunks++
    if (sent.lost) summary.lostChunks++
    for (const k of ['created', 'updated', 'unchanged'] as const) summary.results[k] += sent.results[k]
    await report.add(sent.refusals.sort((a, b) => a.line - b.line))
    bar.update(read.bytes, summary.rows)
    bar.chunk(sent.note)
  }
  const flush = async () => {
    await send(chunk, String(index++))
    chunk = []
  }
  try {
    const input = stdin ? process.stdin : createReadStream(options.file)
    for await (const row of (ndjson ? ndjsonRows : csvRows)(input, type, read, options.upsert)) {
      chunk.push(row)
      if (chunk.length === CHUNK_SIZE) await flush()
      else if (chunk.length % 500 === 0) bar.update(read.bytes, summary.rows + chunk.length)
    }
    if (chunk.length > 0) await flush()
  } catch (err) {
    // The file's own read errors (a stream's error, not one of a chunk's requests).
    if (isReadError(err)) throw new Error(`cannot read ${stdin ? 'standard input' : options.file}: ${fsReason(err)}`)
    throw err
  } finally {
    bar.stop()
  }
  return summary
}
