import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { openDb } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'

/**
 * A migrated, empty PGlite data directory, dumped once per run and loaded by every PGlite test
 * store: creating a PGlite runs initdb (seconds of WASM work) and then every migration; loading a
 * dump skips both. The file name carries a hash of the migrations and of the PGlite version, so
 * a changed migration never starts from a stale template.
 */

const MIGRATIONS = path.resolve('src/store/migrations')

export function templatePath(): string {
  const hash = createHash('sha256')
  const pkg = JSON.parse(readFileSync(path.resolve('node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string }
  hash.update(pkg.version)
  for (const file of readdirSync(MIGRATIONS).sort()) hash.update(file).update(readFileSync(path.join(MIGRATIONS, file)))
  return path.join(os.tmpdir(), `kbis-pglite-template-${hash.digest('hex').slice(0, 16)}.tar`)
}

/** Builds the template unless this run (or an earlier one) already has it. */
export async function ensureTemplate(): Promise<string> {
  const file = templatePath()
  if (existsSync(file)) return file
  // Migrated by the store, then dumped by PGlite itself (dumpDataDir, which the Db interface does
  // not offer) once the store has closed the directory.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-test-template-'))
  let dump: Blob
  try {
    const db = await openDb({ dataDir: dir })
    await migrate(db)
    await db.close()
    const pglite = await PGlite.create(dir)
    dump = await pglite.dumpDataDir('none')
    await pglite.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  // Written aside and renamed: a reader never sees half a file.
  const partial = `${file}.${process.pid}.partial`
  writeFileSync(partial, Buffer.from(await dump.arrayBuffer()))
  renameSync(partial, file)
  return file
}

let template: Promise<Uint8Array> | null = null

/**
 * The template's bytes for `openDb({ loadDataDir })`, read once per process: the shared workers
 * open hundreds of stores. Each store's thread gets a copy (≈ 0.13 s for the 40 MB on a slow
 * machine, most of it the new pages; PGlite copies bytes it cannot take as they are as much). A
 * Blob, which crossed to the thread without a copy, cost ≈ 0.5 s: Node 20 reads a Blob in 64 kB
 * pieces, on the thread that made it.
 */
export function loadTemplate(): Promise<Uint8Array> {
  template ??= ensureTemplate().then((file) => readFileSync(file))
  // A failure is not kept: the next store tries again.
  template.catch(() => { template = null })
  return template
}

/**
 * A migrated PGlite data directory at `dir`, unpacked from the template (a dump is the data
 * directory's own tree), for tests that start a server process on a directory but are not about
 * its first start: initdb and the migrations take seconds of WASM work per directory.
 */
export async function templateDataDir(dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true })
  // stdio piped: tar's note on the dump's leading '/' stays out of the test output.
  execFileSync('tar', ['-xf', await ensureTemplate(), '-C', dir], { stdio: 'pipe' })
  return dir
}
