import { readdir, readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import type { Db } from './db.js'

// Migrations stay .sql files beside this module; dist/ gets a copy at build time (see the build script).
const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations')

/**
 * Every migration runs holding this transaction-level advisory lock, and checks again under it
 * that no other process applied it meanwhile: processes starting at once on one PostgreSQL (a
 * deploy, `--workers` hosts) apply each migration once, the others wait for it and go on.
 */
const MIGRATION_LOCK = `SELECT pg_advisory_xact_lock(hashtext('kbis_migrations'))`

let listed: Promise<string[]> | undefined
/** This version's migration files in order, read once (they do not change while it runs; /readyz asks at each probe). */
const migrationFiles = (): Promise<string[]> =>
  (listed ??= readdir(MIGRATIONS_DIR).then(
    (names) => names.filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort(),
    (err: unknown) => { listed = undefined; throw err },
  ))

const appliedVersions = async (db: Db): Promise<Set<string>> =>
  new Set((await db.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version))

/**
 * Applies every migration not yet applied, in file-name order, each in its own transaction.
 * Append-only: a migration file is never edited once released.
 */
export async function migrate(db: Db): Promise<string[]> {
  await db.transaction(async (tx) => {
    await tx.query(MIGRATION_LOCK)
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
  })
  const done = await appliedVersions(db)
  const files = await migrationFiles()
  // A store a newer kbis migrated (an upgrade rolled back, an old binary started by mistake): this
  // version's statements may write what the newer schema forbids or no longer has (an outside
  // audit saw 500s of an older version on a newer store). Refused before anything runs.
  const known = new Set(files)
  const newer = [...done].filter((version) => !known.has(version)).sort()
  if (newer.length > 0) {
    throw new Error(`the store was migrated by a newer version of kbis (${newer.join(', ')} ${newer.length === 1 ? 'is' : 'are'} unknown to this one): run that version or a later one (an older one could damage its data), or restore a backup taken before the upgrade`)
  }
  const applied: string[] = []
  for (const file of files) {
    if (done.has(file)) continue
    const sql = await readFile(path.join(MIGRATIONS_DIR, file), 'utf8')
    const ran = await db.transaction(async (tx) => {
      // A migration (an index on a large table) may take longer than requests may, and so may
      // waiting for another process's.
      await tx.query('SET LOCAL statement_timeout = 0')
      await tx.query(MIGRATION_LOCK)
      if ((await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [file])).rows.length > 0) return false
      for (const statement of splitStatements(sql)) await tx.query(statement)
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [file])
      return true
    })
    if (ran) applied.push(file)
  }
  return applied
}

/** Migration files not yet applied (readiness: a process whose code is ahead of its store is not ready). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const done = await appliedVersions(db)
  return (await migrationFiles()).filter((f) => !done.has(f))
}

/**
 * Splits a migration into statements (prepared statements take one at a time): a `;` at the end
 * of a line ends one, except inside a dollar-quoted function body (`$$ … $$`), whose own
 * statements end lines with `;` too.
 */
function splitStatements(sql: string): string[] {
  const statements: string[] = []
  let current: string[] = []
  let inBody = false
  for (const line of sql.split('\n')) {
    if ((line.match(/\$\$/g) ?? []).length % 2 === 1) inBody = !inBody
    current.push(line)
    if (!inBody && /;\s*$/.test(line)) {
      statements.push(current.join('\n').replace(/;\s*$/, ''))
      current = []
    }
  }
  statements.push(current.join('\n'))
  return statements.map((s) => s.replace(/^\s*--.*$/gm, '').trim()).filter((s) => s.length > 0)
}
