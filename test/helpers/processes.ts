import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { openDb, type Db, type StoreKind } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { createTestStore, type TestStore } from './stores.js'
import { templateDataDir } from './pglite-template.js'
import { ACME } from './fixtures.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface ServerProcess {
  address: string
  child: ChildProcess
  stop(): Promise<void>
}

/** Starts test/helpers/server-entry.ts in its own Node process and waits until it listens. */
export async function startServerProcess(env: Record<string, string | undefined>): Promise<ServerProcess> {
  // Baseline WebAssembly code only, as the CLI's servers of the tests (TEST_WASM in cli-server.ts).
  const child = spawn(process.execPath, ['--liftoff-only', '--import', 'tsx', 'test/helpers/server-entry.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk) => { stderr += String(chunk) })
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server process did not start in 60 s: ${stderr}`)), 60_000)
    child.once('exit', (code) => reject(new Error(`server process exited with ${code}: ${stderr}`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const { address } = JSON.parse(line) as { address: string }
        clearTimeout(timer)
        resolve(address)
      } catch {
        // not the readiness line
      }
    })
  })
  return {
    address,
    child,
    stop: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.once('exit', () => resolve())
      child.kill('SIGTERM')
    }),
  }
}

/** A store made ready for server processes: the ACME setup and an Admin key, and how to reach it. */
export interface ServerStore {
  /** What a server process needs to open the store (DATABASE_URL + schema, or KBIS_DATA_DIR). */
  env: Record<string, string | undefined>
  /** An Admin key of the Owner with role `all`. */
  key: string
  drop(): Promise<void>
}

/**
 * A fresh PostgreSQL schema, or a PGlite data directory unpacked from the migrated template, with
 * ACME applied and an Admin key. A PGlite directory belongs to one process: it is closed here, for
 * the server process to open.
 */
export async function prepareServerStore(kind: StoreKind, prefix: string): Promise<ServerStore> {
  let db: Db
  let pg: TestStore | null = null
  let dataDir = ''
  let env: Record<string, string | undefined>
  if (kind === 'postgres') {
    pg = await createTestStore('postgres')
    db = pg.db
    env = { DATABASE_URL: process.env.TEST_DATABASE_URL, KBIS_TEST_SCHEMA: pg.schema! }
  } else {
    dataDir = await templateDataDir(await mkdtemp(path.join(tmpdir(), `kbis-${prefix}-`)))
    db = await openDb({ dataDir })
    await migrate(db)
    env = { KBIS_DATA_DIR: dataDir }
  }
  await applySetup(db, ACME as unknown as SetupFile)
  const key = (await createKeyFromCli(db, { org: 'acme', user: 'owner@acme.test', name: prefix, type: 'Admin', roles: ['all'] })).secret
  if (kind === 'pglite') await db.close()
  return {
    env,
    key,
    async drop() {
      await pg?.drop()
      if (dataDir) await rm(dataDir, { recursive: true, force: true })
    },
  }
}
