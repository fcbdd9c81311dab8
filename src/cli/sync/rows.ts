import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import { parse } from 'csv-parse'
import { CellError, checkColumns, csvItem, ndjsonItem, type AssetTypeInfo, type ItemFields } from './convert.js'

/** One data row of the file: its line number (the header is line 1) and its item, or why not. */
export type FileRow =
  | { line: number; item: ItemFields; issues?: undefined }
  | { line: number; item?: undefined; issues: { field: string; message: string }[] }

function issuesOf(err: unknown): { field: string; message: string }[] {
  const list = err instanceof AggregateError ? err.errors : [err]
  return list.map((e) => (e instanceof CellError ? { field: e.field, message: e.message } : { field: '', message: String((e as Error).message ?? e) }))
}

/** What the reader has consumed, for the progress bar (bytes of the file). */
export interface ReadProgress {
  bytes: number
}

/**
 * Reads a CSV file streaming with csv-parse: the first line names the columns (property keys,
 * `name`, `access_domain_key`); each record's line is where it starts (a quoted cell may span lines).
 */
export async function* csvRows(file: string, type: AssetTypeInfo, progress: ReadProgress): AsyncGenerator<FileRow> {
  const input = createReadStream(file)
  input.on('data', (chunk) => { progress.bytes += chunk.length })
  const parser = input.pipe(parse({ bom: true, raw: true, info: true, skip_empty_lines: true, relax_column_count: false }))
  let columns: string[] | null = null
  for await (const entry of parser as AsyncIterable<{ record: string[]; raw: string; info: { lines: number } }>) {
    const { record, raw, info } = entry
    // info.lines is where the record ends; its raw text (less skipped blank lines before it) says how many lines it spans.
    const line = info.lines - (raw.replace(/^(\r?\n)+/, '').replace(/\r?\n$/, '').match(/\n/g) ?? []).length
    if (columns === null) {
      columns = record.map((c) => c.trim())
      checkColumns(type, columns)
      continue
    }
    const cells: Record<string, string> = {}
    columns.forEach((c, i) => { cells[c] = record[i] ?? '' })
    try {
      yield { line, item: csvItem(type, cells) }
    } catch (err) {
      yield { line, issues: issuesOf(err) }
    }
  }
}

/** Reads an NDJSON file line by line: each non-empty line one record (as `kbis export` writes them). */
export async function* ndjsonRows(file: string, type: AssetTypeInfo, progress: ReadProgress): AsyncGenerator<FileRow> {
  const input = createReadStream(file, { encoding: 'utf8' })
  input.on('data', (chunk) => { progress.bytes += Buffer.byteLength(chunk) })
  let line = 0
  for await (const text of createInterface({ input, crlfDelay: Infinity })) {
    line++
    if (text.trim() === '') continue
    let record: unknown
    try {
      record = JSON.parse(text)
    } catch {
      yield { line, issues: [{ field: '', message: 'the line is not valid JSON' }] }
      continue
    }
    try {
      yield { line, item: ndjsonItem(type, record) }
    } catch (err) {
      yield { line, issues: issuesOf(err) }
    }
  }
}
