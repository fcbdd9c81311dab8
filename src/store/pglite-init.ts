import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { runNodeScript } from './node-child.js'
import { LOCK_FILE } from './pglite-lock.js'
import { unpackTemplate } from './pglite-template.js'

const require = createRequire(import.meta.url)

/**
 * The data directory, created if it does not exist yet (before its lock is taken and before
 * initdb, store/pglite-db.ts); a path that is a file, or one that cannot be created, is refused by name.
 */
export function createDataDir(dir: string): void {
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new Error(`the PGlite data directory ${dir} is not a directory`)
  try {
    makeDirectory(dir)
  } catch (err) {
    throw new Error(`could not initialize the PGlite data directory ${dir}: ${(err as Error).message}`)
  }
}

// What a PostgreSQL cluster's directory holds at its top, kbis's lock beside it: all a data
// directory may hold before its PG_VERSION is written (an initialization that was interrupted).
const CLUSTER_ENTRY = new RegExp(`^(?:PG_VERSION|base|global|pg_[a-z_]+|pg_hba\\.conf|pg_ident\\.conf|postgresql(?:\\.auto)?\\.conf|postmaster\\.(?:pid|opts)|${LOCK_FILE.replace('.', '\\.')})$`)

/**
 * Refuses a data directory kbis must not set a store up in, called holding its lock (so that a
 * process initializing it is waited for): with `existingOnly` (`keys`, `users`: they name an
 * organization, which a new store does not hold) any directory without a store; otherwise one that
 * holds files of its own and no store (initdb refuses a directory that is not empty too), rather
 * than unpack a cluster among them.
 */
export function checkDataDir(dir: string, existingOnly: boolean): void {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return
  if (existingOnly) throw new Error(`${dir} holds no kbis store (no PG_VERSION; kbis serve or kbis apply creates one, --data-dir or KBIS_DATA_DIR names another); nothing was written`)
  const foreign = readdirSync(dir).filter((entry) => !CLUSTER_ENTRY.test(entry))
  if (foreign.length > 0) {
    const named = foreign.slice(0, 3).join(', ') + (foreign.length > 3 ? ', …' : '')
    throw new Error(`the PGlite data directory ${dir} holds files of its own (${named}) and no kbis store (no PG_VERSION): name a new or empty directory; nothing was written`)
  }
}

/**
 * `mkdir -p`: the missing directories of `dir`, outermost first. Not `mkdirSync(dir, {recursive:
 * true})`: Node 20's loops for ever, at full CPU, when creating a directory fails with ENOENT
 * although its parent exists (a path under /proc, some network and pseudo file systems).
 */
export function makeDirectory(dir: string): void {
  const missing: string[] = []
  for (let d = path.resolve(dir); !existsSync(d); d = path.dirname(d)) missing.unshift(d)
  for (const d of missing) {
    try {
      mkdirSync(d)
    } catch (err) {
      // Made by another process meanwhile.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(d).isDirectory()) throw err
    }
  }
}

/** How long a new data directory may take to initialize (initdb takes 2–3 s on a slow machine). */
const INIT_TIMEOUT_MS = 120_000

/**
 * Initializes a new PGlite data directory: unpacked from the build's template when there is one
 * for the installed PGlite (store/pglite-template.ts: a second), else in a short-lived child
 * process, so that the server never runs initdb itself. PGlite's initdb runs PostgreSQL in bootstrap mode several times in
 * the process that opens the directory, snapshotting the WebAssembly heap between runs; that
 * memory (≈ 900 MB at its peak, ≈ 600 MB of it kept after start) is never given back, while a
 * process that opens an existing directory starts at ≈ 280 MB. A worker thread does not help:
 * its compiled code and allocator arenas stay with the process (≈ 240 MB after it ends).
 * A directory that already holds a cluster (PG_VERSION) is left as it is.
 */
export async function initPgliteDataDir(dir: string, onInitialize?: (dir: string) => void): Promise<void> {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return
  onInitialize?.(dir)
  if (await unpackTemplate(dir)) return
  const script = `const { PGlite } = require(${JSON.stringify(require.resolve('@electric-sql/pglite'))})
PGlite.create(process.argv[1]).then((db) => db.close()).catch((err) => {
  process.stderr.write(String((err && (err.message || (err.errno !== undefined && err.name + ' ' + err.errno))) || err))
  process.exitCode = 1
})`
  await runNodeScript(script, [path.resolve(dir)], INIT_TIMEOUT_MS, `could not initialize the PGlite data directory ${dir}`)
}
