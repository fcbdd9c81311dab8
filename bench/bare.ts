/**
 * The yardstick for GET /assets/{id}: a bare Fastify route doing the same SELECT with `pg`, with
 * no authentication, access rules or schemas. Same process kind as bench/serve.ts.
 * Env: BENCH_DATABASE_URL, BENCH_SCHEMA, BENCH_ORG_ID.
 */
import Fastify from 'fastify'
import pg from 'pg'

const env = process.env
const pool = new pg.Pool({ connectionString: env.BENCH_DATABASE_URL, max: 10, options: `-c search_path=${env.BENCH_SCHEMA}` })
const orgId = env.BENCH_ORG_ID!
const second = (d: Date) => `${d.toISOString().slice(0, 19)}Z`

const app = Fastify({ logger: false })
app.get('/assets/:id', async (request, reply) => {
  const { id } = request.params as { id: string }
  const { rows } = await pool.query(
    `SELECT a.id, a.asset_type_key, a.name, a.access_domain_key, a.properties, a.created_at, a.updated_at
     FROM assets a WHERE a.org_id = $1 AND a.archived_at IS NULL AND a.id = $2`,
    [orgId, id],
  )
  const row = rows[0]
  if (!row) return reply.code(404).send({ errors: [{ status: '404', code: 'not_found', detail: 'not found' }] })
  return { data: { ...row, created_at: second(row.created_at), updated_at: second(row.updated_at) } }
})
const url = await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ bench: 'ready', url })}\n`)
process.on('SIGTERM', () => {
  void app.close().then(() => pool.end()).finally(() => process.exit(0))
})
