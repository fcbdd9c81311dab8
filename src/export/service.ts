import type { RequestContext } from '../request/context.js'
import { AppError, Errors } from '../core/errors.js'
import { Params } from '../store/sql.js'
import { scopeFilter } from '../access/scope.js'
import { parseListFilters, resolveListFilters } from '../query/list.js'
import { compileWhere } from '../query/where.js'
import type { Db } from '../store/db.js'
import { selectBatchEnd, selectExportBatch, selectNdjsonBatch, type ExportQuery, type NdjsonBatch } from './sql.js'
import type { AssetType } from '../metamodel/types.js'
import { csvLines } from './format.js'

export type ExportFormat = 'ndjson' | 'csv'

// Rows per statement: large enough that the per-statement cost vanishes, small enough that one
// batch (and its serialized text) stays a few MB. NDJSON by COPY (PostgreSQL) pays a few round
// trips a batch and arrives as bytes: 7,500 lines (about 3 MB of servers) a batch. 10,000 were no
// faster (BENCH_ONLY=sync, 200,000 servers, two runs each: 0.59 / 0.63 s against 0.64 / 0.58 s)
// and held more: the RSS of a process serving and reading an export of 200,000 notes grew by
// 50–60 MB with 10,000 a batch, 36–41 MB with 7,500, 27–34 MB with 5,000 (slower: 0.71 s).
export const EXPORT_BATCH_SIZE = 1000
export const COPY_BATCH_SIZE = 7_500
/**
 * NDJSON on PGlite, one aggregated text a batch: each statement costs PGlite a few ms of its own,
 * and each batch's text is garbage of its size, twice (the worker's copy and this thread's). 200,000
 * servers in one process: 1,000 a batch 1.72–1.74 s, 2,000 1.66–1.67 s, 4,000 1.57–1.61 s; but with
 * both cores busy the large-export test (≤ 60 MB) grew by 44 MB at 4,000, by 9–38 MB at 2,000.
 */
export const PGLITE_NDJSON_BATCH_SIZE = 2000
/**
 * Where this process holds a whole batch (CSV, and NDJSON on PGlite, whose memory also grows for
 * good to the largest result it held), a batch's text stays about this size: rows of large
 * documents come fewer at a time. The first batch, of rows of unknown size, is small.
 */
export const EXPORT_BATCH_BYTES = 4 * 1024 * 1024
const FIRST_BATCH_SIZE = 100

/** Rows for the next batch, from the rows and text length (characters) sent so far; at most `max`. */
export function nextBatchSize(rows: number, length: number, max: number): number {
  if (rows === 0) return Math.min(FIRST_BATCH_SIZE, max)
  return Math.max(1, Math.min(max, Math.floor(EXPORT_BATCH_BYTES / Math.max(1, length / rows))))
}

const lengthOf = (chunks: readonly (string | Buffer)[]): number => chunks.reduce((n, c) => n + c.length, 0)
/**
 * NDJSON batches by COPY being written at once while the one before them is sent; one when this
 * process compresses the answer, which then needs a core of its own (decision 0014, addendum: on
 * two cores a second batch ahead made the plain export 6–16 % faster, the compressed one not).
 */
export const COPY_READ_AHEAD = 2

/**
 * A batch's chunks, each let go as it is handed on: with `yield*` the batch stayed whole until its
 * last chunk was sent, beside the batches read ahead. On PostgreSQL, 200,000 servers exported in
 * one process with its client: Buffers alive at the peak 61 → 29–32 MB, RSS growth 67–81 → 37–39 MB.
 */
function* handOn<T>(chunks: T[]): Generator<T> {
  for (let chunk = chunks.shift(); chunk !== undefined; chunk = chunks.shift()) yield chunk
}

/** Lines per NDJSON batch on this store: by COPY where the store has it (decision 0014). */
export function ndjsonBatchSize(db: Db): number {
  return db.copyLines ? COPY_BATCH_SIZE : PGLITE_NDJSON_BATCH_SIZE
}

export interface ExportPlan {
  /**
   * The export's text, batch by batch in id order (CSV: the header first); the next statement
   * runs only when the consumer asks for the next chunk.
   */
  chunks(): AsyncGenerator<string | Buffer>
}

/**
 * Checks and compiles an export (CONTRACT §16) before anything is sent: the filters of
 * `GET /assets` with the key's view scope, as the list does. CSV needs `filter[asset_type_key]`
 * (its columns are that type's properties).
 */
export function planExport(ctx: RequestContext, query: Record<string, unknown>, format: ExportFormat, options: { compressed?: boolean } = {}): ExportPlan {
  const typeKey = query['filter[asset_type_key]']
  if (format === 'csv' && typeof typeKey !== 'string') {
    throw new AppError(Errors.INVALID_FILTER, [{ detail: 'a CSV export needs filter[asset_type_key]: its columns are the properties of one asset type', parameter: 'filter[asset_type_key]' }])
  }
  const assetType = typeof typeKey === 'string' ? ctx.metamodel.assetTypes.get(typeKey) ?? null : null
  if (format === 'csv' && assetType === null) {
    throw new AppError(Errors.INVALID_FILTER, [{ detail: `unknown asset type ${JSON.stringify(typeKey)}`, parameter: 'filter[asset_type_key]' }])
  }
  const params = new Params()
  const where = compileWhere({
    target: 'assets', alias: 'a', orgId: ctx.auth.orgId,
    filter: resolveListFilters(parseListFilters(query), 'assets', ctx.metamodel), scope: scopeFilter(ctx.auth, 'view'),
  }, params)
  const compiled = { where, params }
  if (format === 'csv' && assetType !== null) return { chunks: () => csvChunks(ctx.db, compiled, assetType) }
  if (!ctx.db.copyLines) return { chunks: () => ndjsonChunks(ctx.db, compiled) }
  return { chunks: () => copyChunks(ctx.db, compiled, options.compressed === true ? 1 : COPY_READ_AHEAD) }
}

/** CSV: the header, then batches of rows in id order, each written here. */
async function* csvChunks(db: Db, compiled: ExportQuery, type: AssetType): AsyncGenerator<string> {
  yield csvLines(type, [], true)
  let afterId: string | null = null
  let [sent, length] = [0, 0]
  for (;;) {
    const size = nextBatchSize(sent, length, EXPORT_BATCH_SIZE)
    const rows = await selectExportBatch(db, compiled, afterId, size)
    if (rows.length > 0) {
      const text = csvLines(type, rows, false)
      sent += rows.length
      length += text.length
      yield text
    }
    if (rows.length < size) return
    afterId = rows[rows.length - 1]!.id
  }
}

/**
 * A batch of NDJSON lines. A batch read while the previous one is still being sent may fail
 * before anyone awaits it: it is marked handled at once (the await still throws), or the process
 * would crash.
 */
function readLines(db: Db, compiled: ExportQuery, afterId: string | null, throughId: string | null, rows: number): Promise<NdjsonBatch> {
  const batch = selectNdjsonBatch(db, compiled, afterId, rows, throughId)
  batch.catch(() => undefined)
  return batch
}

/**
 * NDJSON without COPY (PGlite), one batch read ahead: the store writes the next batch while this
 * one goes out, and never more than one (PGlite is this process: it only overlaps with the
 * socket's writes).
 */
async function* ndjsonChunks(db: Db, compiled: ExportQuery): AsyncGenerator<string | Buffer> {
  const size = ndjsonBatchSize(db)
  let asked = nextBatchSize(0, 0, size)
  let next = readLines(db, compiled, null, null, asked)
  let [sent, length] = [0, 0]
  for (;;) {
    const batch = await next
    sent += batch.rows
    length += lengthOf(batch.chunks)
    const more = batch.rows === asked
    if (more) {
      asked = nextBatchSize(sent, length, size)
      next = readLines(db, compiled, batch.lastId, null, asked)
    }
    yield* handOn(batch.chunks)
    if (!more) return
  }
}

/**
 * NDJSON by COPY (PostgreSQL), which writes the lines, and that is most of an export's work
 * (decision 0014): the end of each batch is found ahead (a walk of its keys), so that `readAhead`
 * batches are written at once, by as many server processes, while this one is sent. The last
 * batch has no end: it reads a whole batch's rows, and if rows were added meanwhile the export
 * goes on after it.
 */
async function* copyChunks(db: Db, compiled: ExportQuery, readAhead: number): AsyncGenerator<string | Buffer> {
  const size = ndjsonBatchSize(db)
  const ahead: Promise<NdjsonBatch>[] = []
  let from: string | null = null
  let open = false
  for (;;) {
    // The batch to send next and `readAhead` after it.
    while (ahead.length <= readAhead && !open) {
      const end = await selectBatchEnd(db, compiled, from, size)
      ahead.push(readLines(db, compiled, from, end, size))
      if (end === null) open = true
      else from = end
    }
    const batch = await ahead.shift()!
    yield* handOn(batch.chunks)
    if (ahead.length === 0 && open) {
      if (batch.rows < size) return
      from = batch.lastId
      open = false
    }
  }
}
