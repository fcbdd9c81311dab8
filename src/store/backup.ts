import { createWriteStream, existsSync, realpathSync, statSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { create } from 'tar'
import type { Db } from './db.js'
import { FileWriteError, landingOf, writeWhole } from './write-whole.js'
import { LOCK_FILE, lockDataDir } from './pglite-lock.js'

/** What `kbis backup` wrote. */
export interface BackupReport {
  file: string
  bytes: number
}

// Files of a data directory that belong to the process running it, not to the data (as
// pg_basebackup leaves them out), kbis's own lock among them (store/pglite-lock.ts).
const NOT_DATA = new Set(['postmaster.pid', 'postmaster.opts', LOCK_FILE])

/** What an archive may be named: a tar file, compressed or not (the name says which, docs/cli.md). */
const ARCHIVE_NAME = /\.(tar|tar\.gz|tgz)$/i

function inside(target: string, source: string): boolean {
  return target === source || target.startsWith(`${source}${path.sep}`)
}

function insideError(file: string, dir: string): BackupError {
  return new BackupError(`${file} is inside the data directory ${dir}: write the backup somewhere else`)
}

/**
 * Writes a tar archive of the PGlite data directory `dir` to `file` (gzip-compressed when the name
 * ends in `.gz` or `.tgz`), streaming: memory does not grow with the directory. The archive is
 * written whole or not at all (store/write-whole.ts). The caller guarantees that nothing
 * writes to `dir` meanwhile (PgliteDb.backup holds the store's lock); what it holds is then what a
 * crash at that moment would leave, which PostgreSQL recovers from its write-ahead log when the
 * copy is opened.
 */
export async function writeDataDirArchive(dir: string, file: string): Promise<BackupReport> {
  const source = path.resolve(dir)
  const target = path.resolve(file)
  if (!existsSync(path.dirname(target))) {
    if (inside(target, source)) throw insideError(file, dir)
    throw new BackupError(`the directory of ${file} does not exist`)
  }
  // Where the archive really goes: through a symbolic link, a path outside may lead inside.
  const realSource = existsSync(source) ? realpathSync(source) : source
  if (inside(path.join(realpathSync(path.dirname(target)), path.basename(target)), realSource)) throw insideError(file, dir)
  // And through a link named as the archive.
  if (inside(landingOf(target).path, realSource)) throw insideError(file, dir)
  if (existsSync(target) && statSync(target).isDirectory()) throw new BackupError(`${file} is a directory: name the archive, e.g. ${path.join(file, 'kbis-backup.tar.gz')}`)
  if (!ARCHIVE_NAME.test(target)) throw new BackupError(`${file}: name the archive .tar, or .tar.gz (.tgz) to compress it`)
  try {
    await writeWhole(target, (partial) => pipeline(
      // From the directory itself: through a symbolic link, `.` would be archived as the link alone.
      create({ cwd: realSource, gzip: /\.t?gz$/i.test(target), portable: true, filter: (entry) => !NOT_DATA.has(entry.replace(/^\.\//, '')) }, ['.']),
      createWriteStream(partial),
    ))
  } catch (err) {
    // Said to the operator as it is (through the server's socket too), not as a fault.
    throw err instanceof FileWriteError ? new BackupError(err.message) : err
  }
  return { file: target, bytes: (await stat(target)).size }
}

/**
 * `kbis backup` with no server on the directory: its files as they are, the directory locked
 * meanwhile (store/pglite-lock.ts), so that no server opens it during the copy and none that
 * could not be reached through its socket is running.
 */
export async function backupClosedDataDir(dir: string, file: string): Promise<BackupReport> {
  const lock = lockDataDir(dir)
  try {
    return await writeDataDirArchive(dir, file)
  } finally {
    lock.release()
  }
}

/** `kbis backup` in the server that owns the data directory (asked through its socket, cli/control.ts). */
export async function backupStore(db: Db, req: { file: string }): Promise<BackupReport> {
  if (!db.backup) throw new BackupError('this store has no data directory to back up (kbis backup copies an embedded PGlite directory)')
  return db.backup(req.file)
}

/** A backup that cannot be made as asked (a message for the operator, not a fault). */
export class BackupError extends Error {
  override name = 'BackupError'
}
