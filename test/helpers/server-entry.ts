/**
 * A real server process for tests that need several processes on one store (rate-limit sharing):
 * `node --import tsx test/helpers/server-entry.ts`, configured by the environment (DATABASE_URL,
 * KBIS_TEST_SCHEMA, REDIS_URL; or KBIS_DATA_DIR for a PGlite data directory). Listens on 127.0.0.1, on a free port, and prints
 * `{"address": "http://127.0.0.1:<port>"}` on one line once it accepts requests.
 */
import { openDb } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/core/config.js'

const db = await openDb({ databaseUrl: process.env.DATABASE_URL, schema: process.env.KBIS_TEST_SCHEMA, poolSize: 3, dataDir: process.env.KBIS_DATA_DIR })
// A PGlite data directory (the crash test) is opened as `kbis serve` opens it: migrated first.
if (!process.env.DATABASE_URL) await migrate(db)
const app = await buildApp({ db, config: loadConfig(process.env, { host: '127.0.0.1', port: 0 }) })
const address = await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ address })}\n`)

async function stop(): Promise<void> {
  await app.close().catch(() => undefined)
  await db.close().catch(() => undefined)
  process.exit(0)
}
process.on('SIGTERM', () => void stop())
process.on('SIGINT', () => void stop())
