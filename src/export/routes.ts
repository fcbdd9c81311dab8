import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { exportQuery, exportResponses } from './schemas.js'
import { planExport, type ExportFormat } from './service.js'

const CONTENT_TYPES: Record<ExportFormat, string> = { ndjson: 'application/x-ndjson', csv: 'text/csv' }

/**
 * GET /export/assets (CONTRACT §16). The body is a pull stream over keyset batches: the next batch
 * is read only when the socket has drained the previous one (backpressure), and a client that goes
 * away destroys the stream, which ends the generator before its next statement.
 */
export async function exportRoutes(app: FastifyInstance): Promise<void> {
  app.get('/export/assets', {
    schema: { tags: ['export'], summary: 'Export every matching visible asset as NDJSON or CSV', querystring: exportQuery, response: exportResponses },
  }, async (request, reply) => {
    const query = request.query as Record<string, unknown>
    const format = query.format as ExportFormat
    // Whether the compression hook will compress the stream (app.ts: gzip, br, deflate; a q of 0 refuses one).
    const compressed = /\b(?:gzip|br|deflate)\b(?!\s*;\s*q=0(?:\.0+)?\b)/i.test(String(request.headers['accept-encoding'] ?? ''))
    const plan = planExport(await app.requestContext(request), query, format, { compressed })
    // HEAD: GET's headers, without running the export only to throw it away.
    const chunks = request.method === 'HEAD' ? [] : plan.chunks()
    return reply.type(CONTENT_TYPES[format]).send(Readable.from(chunks, { objectMode: false, highWaterMark: 1 }))
  })
}
