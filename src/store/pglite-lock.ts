import { closeSync, openSync, readFileSync, realpathSync, unlinkSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/**
 * One process at a time opens a PGlite data directory: PGlite has no lock of its own (its
 * postmaster.pid holds a fixed -42), and two processes writing the same files corrupt them. The
 * process that opens the directory holds `kbis.lock` in it, created exclusively (`wx`), with its
 * pid, host and start time; it removes the file when it closes the store.
 *
 * A lock left by a process that is gone (a crash, SIGKILL) is taken over when it names this host
 * and a pid that is not running, or this process's own pid (a container restarted as pid 1).
 * A lock of another host cannot be checked from here: the message says which file to remove.
 */
export const LOCK_FILE = 'kbis.lock'

interface Holder {
  pid: number
  host: string
  since: string
}

export interface DataDirLock {
  release(): void
}

/**
 * The directory is opened by another process (a message for the operator, not a fault).
 * `holderRunning`: that process runs on this host, so it may let go soon (a command finishing) or
 * start answering on its control socket (a `kbis serve` still starting): worth waiting for.
 */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError'

  constructor(message: string, readonly holderRunning = false) {
    super(message)
  }
}

// The directories this process holds: its own pid in a lock file is a previous process's (a
// container restarted as pid 1) unless the directory is in here.
const held = new Set<string>()

/** Locks the data directory `dir`, which exists (store/pglite-init.ts createDataDir). */
export function lockDataDir(dir: string): DataDirLock {
  const file = path.join(dir, LOCK_FILE)
  const key = realpathSync(dir)
  if (held.has(key)) throw new DataDirInUseError(`the data directory ${dir} is open in this process already: one store at a time may open a PGlite directory`)
  const mine: Holder = { pid: process.pid, host: os.hostname(), since: new Date().toISOString() }
  const text = JSON.stringify(mine)
  for (let attempt = 0; ; attempt++) {
    try {
      createLockFile(file, text)
      held.add(key)
      return {
        release() {
          if (!held.delete(key)) return
          // Only our own lock: never one that another process took over meanwhile.
          if (read(file) === text) unlinkSync(file)
        },
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 2) throw err
    }
    // An empty or partial file may be one another process is writing this very moment: look again.
    let holder = parse(read(file))
    if (holder === null) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
      holder = parse(read(file))
    }
    if (holder !== null && !(holder.host === mine.host && (holder.pid === mine.pid || !running(holder.pid)))) {
      throw new DataDirInUseError(`the data directory ${dir} is in use by another process (pid ${holder.pid} on ${holder.host}, since ${holder.since}): `
        + `one process at a time may open a PGlite directory (CLI commands reach a running kbis serve through its socket; several processes need PostgreSQL). `
        + `If no kbis runs there, remove ${file}`, holder.host === mine.host)
    }
    // Gone (or unreadable: a file cut short by a crash while it was written): take it over.
    try {
      unlinkSync(file)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
  }
}

/**
 * Creates `file` (exclusively: EEXIST when another lock stands) holding `text`, or leaves none: a
 * lock created and then not written (a full disk) would stand empty. The error names the file,
 * which Node's own ("ENOSPC: no space left on device, write") does not.
 */
function createLockFile(file: string, text: string): void {
  let fd: number
  try {
    fd = openSync(file, 'wx')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    // A directory this user may not write (its owner another user, a read-only mount).
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
      throw new Error(`cannot write the lock file ${file} (${code}): the data directory must be writable by the user kbis runs as`, { cause: err })
    }
    throw err
  }
  try {
    writeFileSync(fd, text)
  } catch (err) {
    closeSync(fd)
    unlinkSync(file)
    throw new Error(`cannot write the lock file ${file}: ${(err as Error).message}`, { cause: err })
  }
  closeSync(fd)
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return null
  }
}

function parse(text: string | null): Holder | null {
  try {
    const value = JSON.parse(text ?? '') as Partial<Holder>
    return typeof value.pid === 'number' && typeof value.host === 'string' ? { pid: value.pid, host: value.host, since: String(value.since) } : null
  } catch {
    return null
  }
}

/** Whether a process with this id runs on this host (EPERM: it does, another user's). */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
