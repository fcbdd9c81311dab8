import { once } from 'node:events'
import { createWriteStream, existsSync, statSync } from 'node:fs'
import path from 'node:path'
import { Readable, type Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream } from 'node:stream/web'
import { errorsOf, readAssetType, type ServerClient } from './client.js'
import { FileWriteError, writeWhole } from '../../store/write-whole.js'

export interface ExportOptions {
  type: string
  format: 'csv' | 'ndjson'
  output?: string | undefined
}

/** What GET /export/assets answers for each format (CONTRACT §16). */
const EXPORT_TYPES: Record<ExportOptions['format'], string> = { csv: 'text/csv', ndjson: 'application/x-ndjson' }

const STDOUT_NAMES = new Set(['/dev/stdout', '/dev/fd/1', '/proc/self/fd/1'])

/**
 * `kbis export`: writes what GET /export/assets returns, streaming, to a file or stdout. A file is
 * written under a temporary name beside it and renamed once the answer is complete: an export
 * cut short (the server stopped, the connection dropped) leaves the file as it was, never a
 * shorter one that looks whole.
 */
export async function runExport(client: ServerClient, options: ExportOptions): Promise<void> {
  const problem = options.output ? outputProblem('--output', options.output) : null
  if (problem) throw new Error(`export failed: ${problem}`)
  // An NDJSON export filters by type, and a type no asset has, unknown included, is an empty answer:
  // a misspelt --type in a nightly job would write an empty file and succeed. (The CSV export's
  // columns come from the type: the server refuses an unknown one itself.)
  if (options.format === 'ndjson') {
    const known = await readAssetType(client, options.type).catch((err: Error) => {
      throw new Error(`export failed: ${err.message}`)
    })
    if (known === null) throw new Error(`export failed: unknown asset type ${JSON.stringify(options.type)}`)
  }
  const query = new URLSearchParams({ format: options.format, 'filter[asset_type_key]': options.type })
  const res = await client.stream(`/api/v1/export/assets?${query.toString()}`)
  if (res.status !== 200 || !res.body) {
    const text = await res.text()
    let detail = `HTTP ${res.status}, not an answer of the kbis API: is ${client.base} the kbis server's address?`
    try {
      detail = errorsOf(JSON.parse(text))[0]?.detail ?? detail
    } catch {
      // not the error envelope: keep the status
    }
    throw new Error(`export failed: ${detail}`)
  }
  const type = res.headers.get('content-type')?.split(';')[0]?.trim()
  if (type !== EXPORT_TYPES[options.format]) {
    await res.body.cancel()
    throw new Error(`export failed: ${client.base} answered ${type ?? 'no content type'}, not ${EXPORT_TYPES[options.format]}: is it the kbis server's address?`)
  }
  const answer = res.body as ReadableStream<Uint8Array>
  // `--output /dev/stdout` is standard output, whatever it is: a socket (a command started by a
  // Node.js process) cannot be opened by that name at all.
  if (!options.output || STDOUT_NAMES.has(options.output)) {
    await copy(answer, process.stdout, 'what was written to stdout is incomplete')
    return
  }
  const output = options.output
  try {
    await writeWhole(output, (partial) => copy(answer, createWriteStream(partial), `${output} was left as it was`))
  } catch (err) {
    if (err instanceof FileWriteError) throw new Error(`export failed: ${err.message}`)
    throw err
  }
}

/**
 * Why a file the CLI writes (`option`: `--output`, `--errors`) cannot be one, said before anything
 * is asked of the server; null when it can be tried.
 */
export function outputProblem(option: string, file: string): string | null {
  if (!existsSync(path.dirname(path.resolve(file)))) return `the directory of ${option} ${file} does not exist`
  if (existsSync(file) && statSync(file).isDirectory()) return `${option} ${file} is a directory, not a file`
  return null
}

/**
 * The answer's bytes into `out`; an answer that ends early is an error that says so. Standard
 * output is written to, never ended nor destroyed with the answer's error (a pipeline would pass
 * it on as stdout's own); its own errors are the CLI's (cli/main.ts: a closed pipe ends quietly).
 */
async function copy(answer: ReadableStream<Uint8Array>, out: Writable, consequence: string): Promise<void> {
  // Made here, with its error listener at once: made earlier, an answer cut short while the file
  // was being prepared (writeWhole's look for orphans) errored with no listener and crashed the CLI.
  const body = Readable.fromWeb(answer)
  let bytes = 0
  // Which side failed first: a pipeline passes either side's error on to the other.
  let first: 'answer' | 'output' | null = null
  body.once('error', () => { first ??= 'answer' })
  out.once('error', () => { first ??= 'output' })
  try {
    if (out === process.stdout) {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        bytes += chunk.length
        if (!out.write(chunk)) await once(out, 'drain')
      }
    } else {
      body.on('data', (chunk: Buffer) => { bytes += chunk.length })
      await pipeline(body, out)
    }
  } catch (err) {
    // Only the answer's side: the file's own errors (a full disk, …) are reported as they are.
    if (first !== 'answer') throw err
    // undici reports a body cut short as `terminated`, its cause the socket's error.
    const { cause, message } = body.errored as Error & { cause?: Error }
    throw new Error(`export failed: the answer ended after ${bytes} bytes, before it was complete (${cause?.message ?? message}); ${consequence}`)
  }
}
