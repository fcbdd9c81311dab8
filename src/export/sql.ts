import type { Db, Queryable } from '../store/db.js'
import { Params } from '../store/sql.js'
import { ASSET_COLUMNS, ASSET_RECORD_JSON, type AssetRow } from '../assets/mapper.js'

export interface ExportQuery {
  where: string
  params: Params
}

/**
 * What follows the keyset condition of a batch: the rows after `afterId` in id order, at most
 * `size`; or, with `throughId`, every row up to and including it (a range whose end was found
 * ahead, {@link selectBatchEnd}).
 */
function batchOf(query: ExportQuery, afterId: string | null, size: number, throughId: string | null = null): { params: Params; from: string } {
  const { params, where } = rowsAfter(query, afterId)
  if (throughId !== null) return { params, from: `FROM assets a WHERE ${where} AND a.id <= ${params.add(throughId)}::uuid ORDER BY a.id` }
  return { params, from: `FROM assets a WHERE ${where} ORDER BY a.id LIMIT ${params.add(size)}` }
}

/** The export's conditions and, past the first batch, the keyset's: rows after `afterId`. */
function rowsAfter(query: ExportQuery, afterId: string | null): { params: Params; where: string } {
  const params = new Params(query.params.values)
  return { params, where: afterId === null ? query.where : `${query.where} AND a.id > ${params.add(afterId)}::uuid` }
}

/**
 * The id of the `size`-th row after `afterId` in id order, or null when fewer follow: the end of
 * the next batch, found before the batch is read (a walk of `size` keys on the primary key), so
 * that batches after it can be read at the same time.
 */
export async function selectBatchEnd(db: Queryable, query: ExportQuery, afterId: string | null, size: number): Promise<string | null> {
  const { params, where } = rowsAfter(query, afterId)
  const result = await db.query<{ id: string }>(`SELECT a.id FROM assets a WHERE ${where} ORDER BY a.id OFFSET ${params.add(size - 1)} LIMIT 1`, params.values)
  return result.rows[0]?.id ?? null
}

/**
 * One keyset batch of a CSV export: the rows after `afterId` in id order. Keyset (not OFFSET, not
 * a cursor held open) keeps each statement short and on the primary key (org_id, id), whatever the
 * number of rows already sent, and holds no connection while the client reads slowly.
 *
 * @example selectExportBatch(db, {where: 'a.org_id = $1 AND a.archived_at IS NULL', params}, null, 1000)
 *   // SELECT a.id, … FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL ORDER BY a.id LIMIT 1000
 */
export async function selectExportBatch(db: Queryable, query: ExportQuery, afterId: string | null, size: number): Promise<AssetRow[]> {
  const batch = batchOf(query, afterId, size)
  const result = await db.query<AssetRow>(`SELECT ${ASSET_COLUMNS} ${batch.from}`, batch.params.values)
  return result.rows
}

/** One NDJSON batch: its lines (each ended by `\n`), the id of its last record, its number of lines. */
export interface NdjsonBatch {
  chunks: (string | Buffer)[]
  lastId: string | null
  rows: number
}

/**
 * One keyset batch of an NDJSON export (as selectExportBatch, or the range up to `throughId`) as
 * its text: the store writes each line, the process passes the text on (parsing every row and
 * writing it again was most of an export's CPU time). On PostgreSQL the lines come by COPY, as bytes this process never decodes
 * (decision 0014); on PGlite as one aggregated text (PGlite copies every field of a result into
 * a buffer of its own, and its memory grows to the largest result it ever held: keep batches
 * small there).
 */
export async function selectNdjsonBatch(db: Db, query: ExportQuery, afterId: string | null, size: number, throughId: string | null = null): Promise<NdjsonBatch> {
  const batch = batchOf(query, afterId, size, throughId)
  if (db.copyLines) return linesBatch(await db.copyLines(`SELECT ${ASSET_RECORD_JSON} ${batch.from}`, batch.params.values))
  // One ordered aggregate: the last id is read from the text's last line, as from COPY's.
  const result = await db.query<{ text: string | null; n: number }>(
    `SELECT string_agg(line, E'\\n' ORDER BY id) || E'\\n' AS text, count(*)::int AS n
     FROM (SELECT a.id, ${ASSET_RECORD_JSON} AS line ${batch.from}) b`,
    batch.params.values,
  )
  const text = result.rows[0]?.text
  if (!text) return { chunks: [], lastId: null, rows: 0 }
  return { chunks: [text], lastId: lineId(text.slice(text.lastIndexOf('\n', text.length - 2) + 1)), rows: Number(result.rows[0]!.n) }
}

/** Every line starts `{"id":"<uuid>"`: the keyset's next bound is read from the last one. */
const ID_START = '{"id":"'.length
const ID_END = ID_START + 36
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

function linesBatch(chunks: Buffer[]): NdjsonBatch {
  let rows = 0
  for (const chunk of chunks) for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) rows++
  if (rows === 0) return { chunks: [], lastId: null, rows }
  return { chunks, lastId: lineId(lastLine(chunks).toString('utf8', 0, ID_END)), rows }
}

/** The id a line starts with. */
function lineId(line: string): string {
  const id = line.slice(ID_START, ID_END)
  if (!UUID.test(id)) throw new Error(`export: a line does not start with its id: ${JSON.stringify(line.slice(0, ID_END))}`)
  return id
}

/** The bytes of the last line of chunks that end with `\n` (a line may span chunks). */
export function lastLine(chunks: readonly Buffer[]): Buffer {
  for (let i = chunks.length - 1; i >= 0; i--) {
    const chunk = chunks[i]!
    // The final `\n` ends the last line; the one before it ends the line before.
    const from = i === chunks.length - 1 ? chunk.length - 2 : chunk.length - 1
    const at = from < 0 ? -1 : chunk.lastIndexOf(10, from)
    if (at !== -1 || i === 0) return Buffer.concat([chunk.subarray(at + 1), ...chunks.slice(i + 1)])
  }
  return Buffer.alloc(0)
}
