import { lstatSync, readlinkSync, realpathSync, statSync, type Stats } from 'node:fs'
import { readdir, rename, rm } from 'node:fs/promises'
import path from 'node:path'
import { running } from './pglite-lock.js'

/**
 * Writes `file` whole or not at all (`kbis backup` here, `kbis export --output` too: the lowest
 * layer both reach): `write` fills a temporary file beside it
 * (`.<name>.<pid>.partial`, on the same file system), which is renamed to `file` once `write`
 * completes and removed if it fails. A reader of `file` (a scheduled job, a restore) never sees
 * a shorter file that looks complete, and a failed attempt leaves an older `file` as it was.
 * An error of the file itself (no space, no permission, …) is a {@link FileWriteError} naming
 * `file`, not the temporary file; `write`'s other errors are passed on as they are.
 *
 * As a shell's `>` does, a symbolic link is followed (the file it names is replaced, the link
 * stays), and a device, FIFO or socket (`/dev/null`, `/dev/stdout`, a named pipe) is written to
 * as it is: renaming over it would put a plain file in its place.
 */
export async function writeWhole<T>(file: string, write: (partial: string) => Promise<T>): Promise<T> {
  const target = landingOf(file)
  if (target.special) {
    try {
      return await write(target.path)
    } catch (err) {
      throw isTargetError(err, target.path) ? new FileWriteError(file, err as Error) : err
    }
  }
  const partial = path.join(path.dirname(target.path), `.${path.basename(target.path)}.${process.pid}.partial`)
  try {
    // `write` starts at once, in this turn of the event loop (the target is looked up
    // synchronously): `kbis export` reads the answer it is handed as soon as it arrives, and a web
    // stream that errors before it is read drops what it had received.
    const result = await write(partial)
    await rename(partial, target.path)
    return result
  } catch (err) {
    throw isTargetError(err, partial) ? new FileWriteError(file, err as Error) : err
  } finally {
    await rm(partial, { force: true })
    await removeOrphans(target.path)
  }
}

/**
 * Where writing `file` lands: the file a symbolic link names (followed to the end; a link to a
 * file not there yet names where it will be), and whether that is a device, FIFO or socket, written
 * to in place, rather than a plain file or none yet, replaced whole.
 */
export function landingOf(file: string): { path: string; special: boolean } {
  // A pipe or socket whose links end in no path (/dev/stdout → /proc/self/fd/1 → "pipe:[…]" when
  // the command is piped into another): realpath cannot follow them, open by the name given can.
  const direct = statOrNothing(file)
  if (direct !== undefined && !direct.isFile() && !direct.isDirectory()) return { path: file, special: true }
  let target = file
  try {
    target = realpathSync(file)
  } catch {
    // Missing, or a link to a file not there yet (as `ln -s new.csv out.csv` before a first export).
    for (let hops = 0; hops < 40; hops++) {
      const link = lstatSync(target, { throwIfNoEntry: false })
      if (link === undefined || !link.isSymbolicLink()) break
      target = path.resolve(path.dirname(target), readlinkSync(target))
    }
  }
  const found = statSync(target, { throwIfNoEntry: false })
  return { path: target, special: found !== undefined && !found.isFile() && !found.isDirectory() }
}

/** The file `file` names, links followed; undefined when there is none or it cannot be looked at (the write will say why). */
function statOrNothing(file: string): Stats | undefined {
  try {
    return statSync(file, { throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

/**
 * Removes the temporary files of earlier attempts at `file` whose process is gone (killed before
 * it could remove its own, `kill -9` during a backup): one whose process still runs is writing.
 */
async function removeOrphans(file: string): Promise<void> {
  const prefix = `.${path.basename(file)}.`
  const names = await readdir(path.dirname(file)).catch(() => [] as string[])
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith('.partial')) continue
    const pid = Number(name.slice(prefix.length, -'.partial'.length))
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || running(pid)) continue
    await rm(path.join(path.dirname(file), name), { force: true }).catch(() => undefined)
  }
}

/**
 * An error of the file being written: opening, writing, closing or renaming the temporary file.
 * Not what `write` reads (the data directory a backup archives), whose own path is in its error.
 */
function isTargetError(err: unknown, partial: string): boolean {
  const { syscall, path: where } = err as NodeJS.ErrnoException
  return syscall !== undefined && syscall !== 'read' && (where === undefined || where === partial)
}

/** "cannot write <file>: ENOSPC: no space left on device". */
export class FileWriteError extends Error {
  override name = 'FileWriteError'

  constructor(file: string, cause: Error) {
    super(`cannot write ${file}: ${fsReason(cause)}`, { cause })
  }
}

/**
 * A file-system error as one says it to a user: `EISDIR: illegal operation on a directory`
 * from Node's `EISDIR: illegal operation on a directory, read` (the system call and the path,
 * often a temporary one, left out: the caller names the file).
 */
export function fsReason(err: Error): string {
  const { code, syscall } = err as NodeJS.ErrnoException
  if (code === undefined || syscall === undefined) return err.message
  return err.message.split(`, ${syscall}`)[0]!
}
