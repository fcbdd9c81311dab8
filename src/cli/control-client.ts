import http from 'node:http'
import net from 'node:net'
import { createHash } from 'node:crypto'
import { existsSync, realpathSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CommandError } from '../keys/cli.js'
import { DataDirInUseError } from '../store/pglite-lock.js'

/*
 * The commands' side of the control socket (the server's side: control.ts). Kept apart so that a
 * command loads neither the server's handlers nor what they import.
 */

/**
 * PGlite lets one process own a data directory. While `kbis serve` runs on one, the other CLI
 * commands (`apply`, `keys create|list|revoke`, `users set-password`, `backup`) hand their work to it through this Unix socket instead of
 * opening the directory a second time.
 */
export function controlSocketPath(dataDir: string): string {
  const id = createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 16)
  return path.join(os.tmpdir(), `kbis-${id}.sock`)
}

/** What a running server does for the other commands, by path on its socket. */
export type ControlCommand = 'apply' | 'keys' | 'keys/list' | 'keys/revoke' | 'users/set-password' | 'backup'

/** Sends a command to a running server; null when none runs on this data directory. */
export async function sendToServer(dataDir: string, command: ControlCommand, body: unknown): Promise<unknown | null> {
  // No directory, no server on it.
  if (!existsSync(dataDir)) return null
  const socketPath = controlSocketPath(dataDir)
  if (!existsSync(socketPath)) return null
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath, path: `/${command}`, method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (c: Buffer) => chunks.push(c))
      response.on('end', () => {
        const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: string }
        if (response.statusCode === 200) resolve(parsed)
        // A server started before this version knows fewer commands.
        else if (response.statusCode === 404) reject(new CommandError(`the kbis serve running on ${dataDir} is an older version without \`${command.replace('/', ' ')}\`; restart it with this one`))
        else reject(new CommandError(parsed.error ?? 'the running server refused the command'))
      })
    })
    request.on('error', (err: NodeJS.ErrnoException) => {
      // A socket left behind by a server that died: nobody owns the directory any more.
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') {
        rmSync(socketPath, { force: true })
        resolve(null)
      } else reject(err)
    })
    request.end(JSON.stringify(body))
  })
}

/** Whether a kbis serve answers on the control socket of `dataDir` (it has opened the directory). */
export async function serverAnswers(dataDir: string): Promise<boolean> {
  if (!existsSync(dataDir)) return false
  const socketPath = controlSocketPath(dataDir)
  if (!existsSync(socketPath)) return false
  return new Promise((resolve) => {
    const socket = net.connect(socketPath)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** How long a command waits for a process of this host that holds the data directory. */
export const HOLDER_WAIT_MS = 60_000

/**
 * Runs `attempt` until it succeeds, or fails otherwise than because another process of this host
 * holds the data directory (DataDirInUseError with `holderRunning`): then again every 250 ms, up
 * to HOLDER_WAIT_MS, saying once on standard error what may hold it (`holders`). `stop` ends the
 * wait at once (the holder is one that will not let go). After that the holder's message stands.
 */
export async function whileHeldHere<T>(dataDir: string, holders: string, attempt: () => Promise<T>, stop: () => Promise<boolean> = async () => false): Promise<T> {
  const deadline = Date.now() + HOLDER_WAIT_MS
  let told = false
  for (;;) {
    try {
      return await attempt()
    } catch (err) {
      if (!(err instanceof DataDirInUseError) || !err.holderRunning || Date.now() >= deadline || await stop()) throw err
      if (!told) process.stderr.write(`kbis: ${dataDir} is held by another process of this host (${holders}); waiting up to ${HOLDER_WAIT_MS / 1000} s\n`)
      told = true
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
}

/**
 * Runs a command on the server that owns the PGlite directory, or here (`here`, which opens it)
 * when none does. While another process of this host holds the directory, it waits (whileHeldHere)
 * for that process to answer on its socket (a `kbis serve` still starting: a new directory's
 * initialization takes seconds, and a script runs `kbis serve &` then `kbis apply` at once) or to
 * let go (another command finishing).
 */
export async function onServerOrHere<T>(dataDir: string, command: ControlCommand, body: unknown, here: () => Promise<T>): Promise<T> {
  return whileHeldHere(dataDir, 'a kbis serve starting, or another command', async () => {
    const remote = await sendToServer(dataDir, command, body)
    return remote !== null ? remote as T : here()
  })
}
