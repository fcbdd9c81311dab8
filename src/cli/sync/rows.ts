import { createInterface } from 'node:readline'
import { pipeline, Transform, type Readable } from 'node:stream'
import { parse, type CsvError, type Parser } from 'csv-parse'
import { CellError, checkColumns, csvItem, ndjsonItem, type AssetTypeInfo, type ItemFields } from './convert.js'
import { unstorableValues } from '../../core/json-values.js'
import { unescapePointer } from '../../core/json.js'

interface Issue {
  field: string
  message: string
}

/**
 * One data row of the file: its line number (the header is line 1), the item to send (null when
 * the row cannot be sent: not JSON, not an object, another asset type) and what is wrong with it
 * already. A CSV row with a cell that does not convert keeps its other cells in `item`, so that
 * the server's dry run can list the rest of what is wrong with it.
 */
export interface FileRow {
  line: number
  /** The line where the row ends: a CSV row with a quoted line break spans several. */
  lastLine: number
  item: ItemFields | null
  issues: Issue[]
}

function issuesOf(err: unknown): Issue[] {
  const list = err instanceof AggregateError ? err.errors : [err]
  return list.map((e) => (e instanceof CellError ? { field: e.field, message: e.message } : { field: '', message: String((e as Error).message ?? e) }))
}

/** What the reader has consumed, for the progress bar (bytes of the file). */
export interface ReadProgress {
  bytes: number
}

/**
 * Counts the lines of a CSV file record by record, from each record's raw text as csv-parse gives
 * it: the empty lines it skipped before the record (of each line break it keeps the first
 * character), the record's cells, then the record's own line break, or its first character (none
 * at the end of the file). Every line break counts once, CRLF, LF or CR, inside quoted cells too.
 * (csv-parse's own `info.lines` counts the CR and the LF of a quoted CRLF as two lines, so every
 * record after a multi-line cell of a Windows file would be numbered too far.)
 */
class LineCounter {
  private next = 1

  /** The lines where the record of this raw text starts and ends. */
  span(raw: string): { line: number; lastLine: number } {
    const skipped = /^[\r\n]*/.exec(raw)![0]
    const cells = raw.slice(skipped.length).replace(/(?:\r\n|\r|\n)$/, '')
    const line = this.next + breaks(skipped)
    const lastLine = line + breaks(cells)
    this.next = lastLine + 1
    return { line, lastLine }
  }
}

/** Line breaks in `text`: CRLF, LF or CR, once each. */
function breaks(text: string): number {
  return text.match(/\r\n|\r|\n/g)?.length ?? 0
}

const REPLACEMENT = '\uFFFD'

/**
 * Watches the bytes of a file on their way to its reader, which decodes them as UTF-8 and puts
 * U+FFFD in place of what is not UTF-8 (a file saved as Windows-1252 or Latin-1: `Café` as the
 * byte E9). Once the file has shown such bytes (`invalid`), a row holding U+FFFD is refused
 * instead of being imported with the character lost; a file that is all UTF-8 keeps its own
 * U+FFFD characters. Bytes reach the reader after passing here, so a row is read after the check
 * of all of its bytes.
 */
class Utf8Watch {
  private invalid = false
  private readonly decoder = new TextDecoder('utf-8', { fatal: true })

  readonly stream = new Transform({
    transform: (chunk: Buffer, _encoding, done) => {
      if (!this.invalid) {
        try {
          this.decoder.decode(chunk, { stream: true })
        } catch {
          this.invalid = true
        }
      }
      done(null, chunk)
    },
  })

  /** Whether `text` (read from the file) lost characters that were not UTF-8. */
  lost(text: string): boolean {
    return this.invalid && text.includes(REPLACEMENT)
  }
}

const NOT_UTF8 = 'not UTF-8 text: kbis import reads UTF-8 files (convert it first, e.g. iconv -f WINDOWS-1252 -t UTF-8)'

/**
 * A record of a CSV stream and the line where it starts; `invalid` (and no cells) when it is not
 * valid CSV: what is wrong with it, in plain words.
 */
export interface CsvRecord {
  line: number
  lastLine: number
  record: string[]
  invalid: string | null
}

/** What a csv-parse syntax error says, in the words of a person who wrote the file. */
function csvProblem(err: CsvError | undefined): string {
  switch (err?.code) {
    case 'CSV_INVALID_CLOSING_QUOTE': {
      const next = /got "(.*)" at line/s.exec(err.message)?.[1]
      return `a quote closes a cell but is followed by ${next === undefined ? 'another character' : JSON.stringify(next)}, not a comma or the end of the line`
    }
    case 'INVALID_OPENING_QUOTE': return 'a quote inside a cell that does not start with one (quote the whole cell and double its quotes: "a ""b"" c")'
    case 'CSV_QUOTE_NOT_CLOSED': return 'a quote opens a cell that is never closed (the file ends inside it)'
    default: return err?.message ?? 'unreadable'
  }
}

/**
 * csv-parse's parser skipping the records that are not valid CSV (`skip_records_with_error`),
 * and what it skipped, in order: `after` = how many records it had given before. Two of its
 * internals are used (csv-parse 7), as its options have no say in them: after a quote that closes
 * a cell and is followed by something else, it would read on as if the cell were still quoted,
 * swallowing every row to the next quote (often the rest of the file), so the cell is closed
 * there and the row ends at its line break as usual; and `state.record`, a new array for each
 * record, tells a further error of the same row from the next row's.
 */
function skippingParser(): { parser: Parser; skipped: { after: number; raw: string; problem: string }[] } {
  const skipped: { after: number; raw: string; problem: string }[] = []
  let lastRecord: unknown = null
  const parser: Parser = parse({
    bom: true, raw: true, skip_empty_lines: true, relax_column_count: true, skip_records_with_error: true,
    // Every record ends at CRLF, LF or CR, whichever it has: left to guess, csv-parse takes the first
    // line's for the whole file, and a file whose line ends change after it (a header typed on Linux,
    // rows pasted from Windows) kept a CR at the end of each row's last cell.
    record_delimiter: ['\r\n', '\n', '\r'],
    on_skip: (err, raw) => {
      const state = (parser as unknown as { state: { quoting: boolean; record: unknown } }).state
      if (err?.code === 'CSV_INVALID_CLOSING_QUOTE') state.quoting = false
      if (state.record === lastRecord) return undefined
      lastRecord = state.record
      skipped.push({ after: parser.info.records, raw: raw ?? '', problem: csvProblem(err) })
      return undefined
    },
  })
  return { parser, skipped }
}

/**
 * The records of a CSV stream with the line where each starts; the first is the header. A record
 * that is not valid CSV comes as `invalid` at its place; its line is counted to its error and
 * then one line break (its rest is not seen: a quoted line break there would shift the numbers).
 */
export async function* csvRecords(input: Readable, utf8 = new Utf8Watch()): AsyncGenerator<CsvRecord> {
  // Records of any length: a row with more or fewer cells than the header is refused by its reader, not the whole file.
  // pipeline, not pipe: a read error of the input (EISDIR, EACCES, …) ends the records with it.
  const { parser, skipped } = skippingParser()
  pipeline(input, utf8.stream, parser, () => {})
  const lines = new LineCounter()
  let given = 0
  function* skippedBefore(count: number): Generator<CsvRecord> {
    while (skipped[0] && skipped[0].after <= count) {
      const s = skipped.shift()!
      yield { ...lines.span(s.raw), record: [], invalid: s.problem }
    }
  }
  for await (const { record, raw } of parser as AsyncIterable<{ record: string[]; raw: string }>) {
    yield* skippedBefore(given++)
    yield { ...lines.span(raw), record, invalid: null }
  }
  yield* skippedBefore(Infinity)
}

/**
 * Reads a CSV stream with csv-parse: the first line names the columns (property keys, `name`,
 * `access_domain_key`); each record's line is where it starts (a quoted cell may span lines).
 * A row of blank cells only (`,,,` as spreadsheets write empty rows) is an empty line, skipped; a
 * row with more or fewer cells than the header, or that is not valid CSV, is refused.
 */
export async function* csvRows(input: Readable, type: AssetTypeInfo, progress: ReadProgress, upsert = false): AsyncGenerator<FileRow> {
  input.on('data', (chunk: Buffer) => { progress.bytes += chunk.length })
  let columns: string[] | null = null
  const utf8 = new Utf8Watch()
  for await (const { line, lastLine, record, invalid } of csvRecords(input, utf8)) {
    if (invalid !== null) {
      if (columns === null) throw new Error(`the header (line ${line}) is not valid CSV: ${invalid}`)
      yield { line, lastLine, item: null, issues: [{ field: '', message: `the row is not valid CSV: ${invalid}` }] }
      continue
    }
    if (columns === null) {
      columns = record.map((c) => c.trim())
      if (columns.some((c) => utf8.lost(c))) throw new Error(`the header is ${NOT_UTF8}`)
      checkColumns(type, columns, upsert)
      continue
    }
    if (record.every((cell) => cell.trim() === '')) continue
    if (record.length !== columns.length) {
      yield { line, lastLine, item: null, issues: [{ field: '', message: `the row has ${record.length} cell${record.length === 1 ? '' : 's'}; the header has ${columns.length} columns` }] }
      continue
    }
    const lost = columns.filter((_, i) => utf8.lost(record[i]!))
    if (lost.length > 0) {
      yield { line, lastLine, item: null, issues: lost.map((field) => ({ field, message: NOT_UTF8 })) }
      continue
    }
    const cells: Record<string, string> = {}
    columns.forEach((c, i) => { cells[c] = record[i]! })
    const { item, issues } = csvItem(type, cells)
    yield { line, lastLine, item, issues: issues.map(({ field, message }) => ({ field, message })) }
  }
  // A file without even a header is no export of anything (one with a header and no rows is).
  if (columns === null) throw new Error('the file is empty: a CSV file starts with its header line (name and property keys)')
}

/** The field of an --errors line for a JSON pointer into an NDJSON record: a property's key, or the member. */
function fieldOf(pointer: string): string {
  const tokens = pointer.split('/').slice(1).map(unescapePointer)
  return tokens[0] === 'properties' && tokens.length > 1 ? tokens[1]! : tokens[0] ?? ''
}

/** Reads an NDJSON stream line by line: each non-empty line one record (as `kbis export` writes them). */
export async function* ndjsonRows(input: Readable, type: AssetTypeInfo, progress: ReadProgress): AsyncGenerator<FileRow> {
  input.on('data', (chunk: Buffer) => { progress.bytes += chunk.length })
  const utf8 = new Utf8Watch()
  pipeline(input, utf8.stream, () => {})
  let line = 0
  for await (const read of createInterface({ input: utf8.stream, crlfDelay: Infinity })) {
    line++
    // A byte-order mark is skipped, as in a CSV file (docs/cli.md).
    const text = line === 1 && read.startsWith('\uFEFF') ? read.slice(1) : read
    if (text.trim() === '') continue
    if (utf8.lost(text)) {
      yield { line, lastLine: line, item: null, issues: [{ field: '', message: `the line is ${NOT_UTF8}` }] }
      continue
    }
    let record: unknown
    try {
      record = JSON.parse(text)
    } catch {
      yield { line, lastLine: line, item: null, issues: [{ field: '', message: 'the line is not valid JSON' }] }
      continue
    }
    // What the server would refuse (an integer past 2^53, 1e400, NUL, a lone surrogate) is
    // refused here, the line's own text deciding, as a CSV cell is: JSON.parse rounded the number.
    const unstorable = unstorableValues(text, record, true)
    if (unstorable.length > 0) {
      yield { line, lastLine: line, item: null, issues: unstorable.map(({ detail, pointer }) => ({ field: fieldOf(pointer ?? ''), message: detail })) }
      continue
    }
    try {
      yield { line, lastLine: line, item: ndjsonItem(type, record), issues: [] }
    } catch (err) {
      yield { line, lastLine: line, item: null, issues: issuesOf(err) }
    }
  }
}
