/**
 * Opens a PGlite data directory as `kbis serve` does (openDb, then the migrations) in a process
 * of its own and prints its memory as one JSON line: `{"external": bytes, "rss": bytes}`.
 * `node --import tsx test/helpers/open-pglite-entry.ts <dir>`.
 */
import { openDb } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'

const db = await openDb({ dataDir: process.argv[2]! })
await migrate(db)
await db.query('SELECT count(*) FROM assets')
const { external, rss } = process.memoryUsage()
process.stdout.write(`${JSON.stringify({ external, rss })}\n`)
await db.close()
