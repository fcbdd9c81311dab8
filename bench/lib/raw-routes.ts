/**
 * Raw SQL inside the service's own process, on the service's own store (bench/serve.ts with
 * BENCH_RAW=1): how the bench reaches the embedded store (PGlite has one connection, owned by
 * that process) and measures its physical limit with the same engine. A bare Fastify instance on
 * a second 127.0.0.1 port: no authentication, no hooks of the app (its PGlite statistics keeper
 * does not see these writes). Bench only — never part of the service.
 *
 * POST /sql {sql, params}          → {rows, ms}    ms: the statement alone, timed in the process
 * POST /tx {before, timed}         → {ms}          statements in one transaction, rolled back
 * POST /copy {sql, data}           → {ms}          PGlite: COPY … FROM '/dev/blob' of `data`
 * POST /raw/:name {sql, params}    registers a read; GET /raw/:name runs it ({data: rows})
 * POST /capture/start, /capture/stop → {statements: [{sql, params}]} every statement of the
 *                                    service's store between the two (the service's own SQL)
 *
 * On PostgreSQL the routes run on a pool of their own (`db`, the server's settings) while the
 * capture records the service's (`serviceDb`); on PGlite both are the process's one store.
 */
import { performance } from 'node:perf_hooks'
import Fastify from 'fastify'
import type { Db } from '../../src/store/db.js'

interface Statement {
  sql: string
  params?: unknown[]
}

const ROLLBACK = new Error('bench: rollback')

/** Wraps db.query so that the statements it runs can be recorded (the reads run outside transactions). */
function capturing(db: Db): { start(): void; stop(): Statement[] } {
  let recorded: Statement[] | null = null
  const query = db.query.bind(db)
  db.query = ((sql: string, params?: readonly unknown[], options?: object) => {
    recorded?.push({ sql, params: [...(params ?? [])] })
    return query(sql, params, options)
  }) as Db['query']
  return {
    start: () => { recorded = [] },
    stop: () => { const out = recorded ?? []; recorded = null; return out },
  }
}

export async function startRawRoutes(db: Db, serviceDb: Db): Promise<{ url: string; close(): Promise<void> }> {
  // The unwrapped query: what these routes run is never recorded.
  const query = db.query.bind(db)
  const capture = capturing(serviceDb)
  const reads = new Map<string, Statement>()
  const app = Fastify({ logger: false, bodyLimit: 200 * 1024 * 1024 })
  app.post('/sql', async (request) => {
    const { sql, params } = request.body as Statement
    const start = performance.now()
    const { rows } = await query(sql, params ?? [])
    return { rows, ms: performance.now() - start }
  })
  app.post('/tx', async (request) => {
    const { before, timed } = request.body as { before: Statement[]; timed: Statement }
    let ms = 0
    await db.transaction(async (tx) => {
      for (const s of before) await tx.query(s.sql, s.params ?? [])
      const start = performance.now()
      await tx.query(timed.sql, timed.params ?? [])
      ms = performance.now() - start
      throw ROLLBACK
    }).catch((err) => { if (err !== ROLLBACK) throw err })
    return { ms }
  })
  app.post('/copy', async (request) => {
    const { sql, data } = request.body as { sql: string; data: string }
    if (db.kind !== 'pglite') throw new Error('bench: /copy is for PGlite (PostgreSQL is copied into from the bench process)')
    // COPY from a blob is not in the Db interface; PGlite's store offers it to the benchmark.
    const pglite = db as unknown as { copyFromBlob(sql: string, data: ArrayBuffer): Promise<void> }
    const blob = new TextEncoder().encode(data).buffer
    const start = performance.now()
    await pglite.copyFromBlob(sql, blob)
    return { ms: performance.now() - start }
  })
  app.post('/raw/:name', async (request) => {
    reads.set((request.params as { name: string }).name, request.body as Statement)
    return { ok: true }
  })
  app.get('/raw/:name', async (request, reply) => {
    const read = reads.get((request.params as { name: string }).name)
    if (!read) return reply.code(404).send({ error: 'no such read' })
    const { rows } = await query(read.sql, read.params ?? [])
    return { data: rows }
  })
  app.post('/capture/start', async () => { capture.start(); return { ok: true } })
  app.post('/capture/stop', async () => ({ statements: capture.stop() }))
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  return { url, close: () => app.close() }
}
