import { createWriteStream } from 'node:fs'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream } from 'node:stream/web'
import { errorsOf, type ServerClient } from './client.js'

export interface ExportOptions {
  type: string
  format: 'csv' | 'ndjson'
  output?: string | undefined
}

/** `kbis export`: writes what GET /export/assets returns, streaming, to a file or stdout. */
export async function runExport(client: ServerClient, options: ExportOptions): Promise<void> {
  const query = new URLSearchParams({ format: options.format, 'filter[asset_type_key]': options.type })
  const res = await client.stream(`/api/v1/export/assets?${query.toString()}`)
  if (res.status !== 200 || !res.body) {
    const text = await res.text()
    let detail = `HTTP ${res.status}`
    try {
      detail = errorsOf(JSON.parse(text))[0]?.detail ?? detail
    } catch {
      // not the error envelope: keep the status
    }
    throw new Error(`export failed: ${detail}`)
  }
  const body = Readable.fromWeb(res.body as ReadableStream<Uint8Array>)
  await pipeline(body, options.output ? createWriteStream(options.output) : process.stdout)
}
