import { execFile, spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { DataDirInUseError, LOCK_FILE, lockDataDir } from '../../src/store/pglite-lock.js'
import { openDb } from '../../src/store/db.js'
import { KBIS_BIN, runCli } from '../helpers/cli-server.js'
import { controlSocketPath } from '../../src/cli/control-client.js'
import { templateDataDir } from '../helpers/pglite-template.js'

/** A process that holds the lock of `dir` until it is killed; resolves once it holds it. */
async function holder(dir: string): Promise<{ pid: number; kill(): Promise<void> }> {
  const script = `const { lockDataDir } = await import(${JSON.stringify(path.resolve('src/store/pglite-lock.ts'))}); lockDataDir(process.argv[1]); console.log('held'); setInterval(() => {}, 1000)`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, dir], { stdio: ['ignore', 'pipe', 'inherit'] })
  onTestFinished(() => void child.kill('SIGKILL'))
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve())
    child.once('exit', (code) => reject(new Error(`the holder exited ${code}`)))
  })
  return { pid: child.pid!, kill: () => new Promise((resolve) => { child.once('exit', () => resolve()); child.kill('SIGKILL') }) }
}

describe('one process at a time opens a PGlite data directory (kbis.lock)', { timeout: 300_000 }, () => {
  let dir: string
  beforeAll(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-lock-')) })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const fresh = (name: string) => path.join(dir, name)
  /** A directory of its own for a test (lockDataDir takes an existing one, as openDb creates it first). */
  const made = (name: string) => {
    mkdirSync(fresh(name))
    return fresh(name)
  }

  it('refuses a directory another live process holds, naming it, and takes it over once that process is gone', async () => {
    const data = made('a')
    const other = await holder(data)
    const held = JSON.parse(readFileSync(path.join(data, LOCK_FILE), 'utf8')) as { pid: number; host: string }
    expect(held).toMatchObject({ pid: other.pid, host: os.hostname() })
    expect(() => lockDataDir(data)).toThrow(DataDirInUseError)
    expect(() => lockDataDir(data)).toThrow(`the data directory ${data} is in use by another process (pid ${other.pid} on ${os.hostname()}, since `)
    await other.kill()
    // Killed (SIGKILL): its lock is left behind, naming a pid that is gone.
    expect(existsSync(path.join(data, LOCK_FILE))).toBe(true)
    const mine = lockDataDir(data)
    expect(JSON.parse(readFileSync(path.join(data, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid })
    // This process holds it now: a second store in the same process is refused too.
    expect(() => lockDataDir(data)).toThrow(`the data directory ${data} is open in this process already`)
    mine.release()
    expect(existsSync(path.join(data, LOCK_FILE))).toBe(false)
  })

  it('refuses a lock of another host, which it cannot check, and takes over an unreadable one or its own pid\'s', () => {
    const data = made('b')
    lockDataDir(data).release()
    const file = path.join(data, LOCK_FILE)
    writeFileSync(file, JSON.stringify({ pid: 1, host: 'elsewhere', since: '2026-11-27T00:00:00.000Z' }))
    expect(() => lockDataDir(data)).toThrow(`(pid 1 on elsewhere, since 2026-11-27T00:00:00.000Z): one process at a time may open a PGlite directory (CLI commands reach a running kbis serve through its socket; several processes need PostgreSQL). If no kbis runs there, remove ${file}`)
    for (const left of ['{"pid":', JSON.stringify({ pid: process.pid, host: os.hostname(), since: 'before a restart' })]) {
      writeFileSync(file, left)
      const lock = lockDataDir(data)
      expect(JSON.parse(readFileSync(file, 'utf8')).since).not.toBe('before a restart')
      lock.release()
    }
  })

  it('openDb holds the lock from before initdb until close; kbis serve waits for a process of this host that holds it, and stops with one line beside a running server', async () => {
    const data = await templateDataDir(fresh('c'))
    const db = await openDb({ dataDir: data })
    expect(JSON.parse(readFileSync(path.join(data, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid })
    await expect(openDb({ dataDir: data })).rejects.toThrow('is open in this process already')
    // Held by a process that is not a server (a command such as `kbis apply` run beside
    // `kbis serve &` in a script): the server says so once, waits, and starts when it is let go.
    const server = runCli(['serve', '--port', '0', '--data-dir', data])
    onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
    await server.waitFor(/held by another process/)
    expect(server.lines).toEqual([`kbis: ${data} is held by another process of this host (a kbis command, or a kbis serve starting); waiting up to 60 s`])
    await db.close()
    expect(existsSync(path.join(data, LOCK_FILE))).toBe(false)
    await server.waitFor(/kbis listening on/)
    // Held by a running server (it answers on the directory's control socket): at once, one line.
    const second = runCli(['serve', '--port', '0', '--data-dir', data])
    onTestFinished(() => void (second.child.exitCode === null && second.child.kill('SIGKILL')))
    expect(await second.exited).toBe(1)
    expect(second.lines).toEqual([
      `kbis: the data directory ${data} is in use by another process (pid ${server.child.pid} on ${os.hostname()}, since ${JSON.parse(readFileSync(path.join(data, LOCK_FILE), 'utf8')).since}): `
      + `one process at a time may open a PGlite directory (CLI commands reach a running kbis serve through its socket; several processes need PostgreSQL). If no kbis runs there, remove ${path.join(data, LOCK_FILE)}`,
    ])
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    expect(existsSync(path.join(data, LOCK_FILE))).toBe(false)
    // A new directory: the lock is taken before the child process initializes it.
    const created = await openDb({ dataDir: fresh('d') })
    expect(existsSync(path.join(fresh('d'), 'PG_VERSION'))).toBe(true)
    await created.close()
    expect(existsSync(path.join(fresh('d'), LOCK_FILE))).toBe(false)
  })

  it('opens a directory reached through a symbolic link (a data directory linked to a mounted volume), locking the directory it names', async () => {
    const real = await templateDataDir(fresh('linked-real'))
    const link = fresh('linked')
    symlinkSync(real, link)
    const db = await openDb({ dataDir: link })
    try {
      expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations')).rows[0]!.n).toBeGreaterThan(0)
      await expect(openDb({ dataDir: real })).rejects.toThrow('is open in this process already')
    } finally {
      await db.close()
    }
  })

  it('kbis serve refuses a directory that an older kbis serve (no kbis.lock, an answer on the control socket) is serving, and changes nothing in it', async () => {
    const data = await templateDataDir(fresh('older'))
    const files = () => readdirSync(data, { recursive: true }).map(String).sort()
    const before = files()
    // Such a server answers on the directory's control socket, and holds no lock.
    const older = net.createServer((socket) => socket.end())
    await new Promise<void>((resolve) => older.listen(controlSocketPath(data), resolve))
    onTestFinished(() => new Promise<void>((resolve) => older.close(() => resolve())))
    const server = runCli(['serve', '--port', '0', '--data-dir', data])
    onTestFinished(() => void (server.child.exitCode === null && server.child.kill('SIGKILL')))
    expect(await server.exited).toBe(1)
    expect(server.lines).toEqual([`kbis: ${data} is served by an older kbis serve of this host (it answers on the directory's control socket but holds no kbis.lock): stop it, then start this one`])
    expect(files()).toEqual(before)
  })

  it('stops with one line saying the data directory must be writable by the user kbis runs as', async () => {
    // A directory this user may not write: kbis run as `nobody` (root writes anywhere).
    const data = made('not-mine')
    chmodSync(dir, 0o755)
    chmodSync(data, 0o555)
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile('runuser', ['-u', 'nobody', '--', KBIS_BIN, 'serve', '--port', '0', '--data-dir', data],
        { env: { PATH: process.env.PATH, HOME: '/' } }, (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }))
    })
    expect(run).toEqual({ code: 1, stderr: `kbis: cannot write the lock file ${path.join(data, LOCK_FILE)} (EACCES): the data directory must be writable by the user kbis runs as\n` })
  })

  it('stops with one line naming the lock file it cannot write (a full disk), and leaves no empty lock behind', async () => {
    const data = fresh('full')
    // A file size limit of 0 fails the lock's write as a full disk does (EFBIG here, ENOSPC there):
    // the lock is the first file kbis writes in a new directory. Standard error is a pipe, which
    // the limit does not reach.
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile('sh', ['-c', 'ulimit -f 0; exec "$0" "$@"', KBIS_BIN, 'serve', '--port', '0', '--data-dir', data],
        { env: { PATH: process.env.PATH, HOME: process.env.HOME } }, (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }))
    })
    expect(run).toEqual({ code: 1, stderr: `kbis: cannot write the lock file ${path.join(data, LOCK_FILE)}: EFBIG: file too large, write\n` })
    expect(existsSync(path.join(data, LOCK_FILE))).toBe(false)
  })
})
