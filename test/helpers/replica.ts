import { execFile } from 'node:child_process'
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { openDb } from '../../src/store/db.js'
import { freePort } from './cli-server.js'

const run = promisify(execFile)
const BIN = '/usr/lib/postgresql/15/bin'

/**
 * A PostgreSQL 15 primary and a hot standby streaming from it, in a temporary directory, on free
 * ports. The server binaries refuse to run as root: they run as `postgres` (runuser).
 */
export interface ReplicaPair {
  primaryUrl: string
  replicaUrl: string
  /** Waits until the standby has replayed everything the primary has written. */
  caughtUp(): Promise<void>
  pauseReplay(): Promise<void>
  resumeReplay(): Promise<void>
  stopReplica(): Promise<void>
  close(): Promise<void>
}

async function asPostgres(cmd: string, args: string[]): Promise<void> {
  await run('runuser', ['-u', 'postgres', '--', path.join(BIN, cmd), ...args], { timeout: 60_000 })
}

async function scalar(url: string, sql: string): Promise<unknown> {
  const db = await openDb({ databaseUrl: url, poolSize: 1 })
  try {
    return Object.values((await db.query(sql)).rows[0] ?? {})[0]
  } finally {
    await db.close()
  }
}

/**
 * The primary's WAL position once everything it holds is written and flushed (so streamed). It
 * commits asynchronously (synchronous_commit = off below): a commit answered to its client may
 * still be only inserted, its record past pg_current_wal_lsn() (the write position), and a wait
 * for that position returned before the standby had replayed it (seen: an asset archived just
 * before still listed by the replica; in a loop of insert, wait, read on the standby, 97 reads of 100
 * missed the row). A synchronous commit flushes every record inserted before it.
 */
async function flushedLsn(url: string): Promise<string> {
  const db = await openDb({ databaseUrl: url, poolSize: 1 })
  try {
    await db.transaction(async (tx) => {
      await tx.query('SET LOCAL synchronous_commit = on')
      // A commit that wrote no record (an xid alone) is asynchronous all the same: write one.
      await tx.query("SELECT pg_logical_emit_message(true, 'kbis-test', 'caught up')")
    })
    return String(Object.values((await db.query('SELECT pg_current_wal_flush_lsn()::text')).rows[0]!)[0])
  } finally {
    await db.close()
  }
}

export async function startReplicaPair(): Promise<ReplicaPair> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-replica-'))
  const { stdout } = await run('id', ['-u', 'postgres'])
  const uid = Number(stdout.trim())
  chownSync(dir, uid, uid)
  const primary = path.join(dir, 'primary')
  const standby = path.join(dir, 'standby')
  const [p1, p2] = [await freePort(), await freePort()]
  const started: string[] = []
  const stop = async (data: string) => asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => undefined)
  try {
    await asPostgres('initdb', ['-D', primary, '-U', 'postgres', '-A', 'trust', '--no-sync', '--no-instructions'])
    // Small and fast: a throwaway cluster. A standby query never waits on, nor is cancelled by, replay.
    appendFileSync(primary + '/postgresql.conf', `\nport = ${p1}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\n`
      + 'fsync = off\nfull_page_writes = off\nsynchronous_commit = off\nshared_buffers = 16MB\nmax_connections = 40\n'
      + 'max_wal_senders = 4\nhot_standby_feedback = on\nmax_standby_streaming_delay = -1\n')
    await asPostgres('pg_ctl', ['-D', primary, '-l', path.join(dir, 'primary.log'), '-w', 'start'])
    started.push(primary)
    await asPostgres('pg_basebackup', ['-h', '127.0.0.1', '-p', String(p1), '-U', 'postgres', '-D', standby, '-R', '-X', 'stream', '-c', 'fast'])
    appendFileSync(standby + '/postgresql.conf', `\nport = ${p2}\n`)
    await asPostgres('pg_ctl', ['-D', standby, '-l', path.join(dir, 'standby.log'), '-w', 'start'])
    started.push(standby)
  } catch (err) {
    for (const data of started) await stop(data)
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const primaryUrl = `postgres://postgres@127.0.0.1:${p1}/postgres`
  const replicaUrl = `postgres://postgres@127.0.0.1:${p2}/postgres`
  return {
    primaryUrl,
    replicaUrl,
    async caughtUp() {
      const target = await flushedLsn(primaryUrl)
      for (let i = 0; i < 200; i++) {
        if ((await scalar(replicaUrl, `SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn`)) === true) return
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      throw new Error('the standby did not catch up in 10 s')
    },
    pauseReplay: async () => void (await scalar(replicaUrl, 'SELECT pg_wal_replay_pause()')),
    resumeReplay: async () => void (await scalar(replicaUrl, 'SELECT pg_wal_replay_resume()')),
    stopReplica: () => stop(standby),
    async close() {
      await stop(standby)
      await stop(primary)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
