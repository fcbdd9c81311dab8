import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/core/config.js'
import { openStore } from '../../src/open-store.js'
import { DEFAULT_PGLITE_SHARED_BUFFERS_MB, PGLITE_MAINTENANCE_WORK_MEM_MB, openDb } from '../../src/store/db.js'
import { makeDirectory } from '../../src/store/pglite-init.js'
import { loadTemplate, templateDataDir } from '../helpers/pglite-template.js'

const run = promisify(execFile)
const MB = 1024 * 1024

/** Memory of a process that opened `dir` as `kbis serve` does (test/helpers/open-pglite-entry.ts). */
async function openedMemory(dir: string): Promise<{ external: number; rss: number }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/helpers/open-pglite-entry.ts', dir], { timeout: 120_000 })
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as { external: number; rss: number }
}

/**
 * A new PGlite data directory is initialized (initdb) in a child process of its own
 * (store/pglite-init.ts): run in the server's process, initdb left ≈ 630 MB of WebAssembly memory
 * there for good, against ≈ 200 MB for a process that opens an existing directory.
 */
describe('pglite: a new data directory', { timeout: 180_000 }, () => {
  let root: string
  beforeAll(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'kbis-pglite-init-'))
  })
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it('costs the server the memory an existing one costs', async () => {
    const dir = path.join(root, 'fresh')
    const fresh = await openedMemory(dir)
    expect(existsSync(path.join(dir, 'PG_VERSION'))).toBe(true)
    const reopened = await openedMemory(dir)
    // Before: 629–660 MB external after a first start, 198 MB after a restart.
    expect(fresh.external).toBeLessThan(400 * MB)
    expect(Math.abs(fresh.external - reopened.external)).toBeLessThan(64 * MB)
  })

  it('keeps what was written when it is opened again', async () => {
    const dir = path.join(root, 'kept')
    const db = await openDb({ dataDir: dir })
    await db.query('CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)')
    await db.query('INSERT INTO notes VALUES (1, $1)', ['first start'])
    await db.close()
    const again = await openDb({ dataDir: dir })
    try {
      expect((await again.query<{ body: string }>('SELECT body FROM notes')).rows).toEqual([{ body: 'first start' }])
    } finally {
      await again.close()
    }
  })

  it('refuses a path that is a file, saying so', async () => {
    const file = path.join(root, 'a-file')
    writeFileSync(file, 'not a directory')
    await expect(openDb({ dataDir: file })).rejects.toThrow(`the PGlite data directory ${file} is not a directory`)
  })

  it('creates every missing directory of the path, and stops with the reason where one cannot be made', async () => {
    const nested = path.join(root, 'a', 'b', 'c')
    makeDirectory(nested)
    makeDirectory(nested)
    expect(readdirSync(path.join(root, 'a', 'b'))).toEqual(['c'])
    // Creating /proc/<name> fails with ENOENT although /proc exists: Node 20's recursive mkdir
    // then never returns (full CPU). In a process of its own, so that such a loop fails the test.
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e',
      `import('./src/store/pglite-init.ts').then((m) => m.createDataDir('/proc/kbis-test-data')).catch((e) => console.log(e.message))`], { timeout: 60_000 })
    expect(stdout).toBe("could not initialize the PGlite data directory /proc/kbis-test-data: ENOENT: no such file or directory, mkdir '/proc/kbis-test-data'\n")
  })

  it('reports why a directory could not be initialized', async () => {
    const blocked = path.join(root, 'a-file-too')
    writeFileSync(blocked, '')
    const dir = path.join(blocked, 'data')
    await expect(openDb({ dataDir: dir })).rejects.toThrow(/^could not initialize the PGlite data directory .*a-file-too\/data: .*(ENOTDIR|not a directory)/)
  })
})

/**
 * PGlite's whole buffer pool is resident from the moment it starts: every MB of `shared_buffers`
 * counts from the first request on (decision 0015). 48 MB by default, KBIS_PGLITE_SHARED_BUFFERS_MB.
 */
describe('pglite: the buffer pool', { timeout: 180_000 }, () => {
  let root: string
  beforeAll(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'kbis-pglite-buffers-'))
  })
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  const sharedBuffers = async (db: Awaited<ReturnType<typeof openDb>>) =>
    (await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]!.shared_buffers

  // The directories and the in-memory store start from the tests' migrated template: how a
  // directory is initialized is the first describe's.
  it('is 48 MB unless configured, on a data directory and in memory', async () => {
    expect(DEFAULT_PGLITE_SHARED_BUFFERS_MB).toBe(48)
    expect(loadConfig({}).pgliteSharedBuffersMb).toBe(48)
    for (const dataDir of [await templateDataDir(path.join(root, 'default')), 'memory://']) {
      const db = await openDb({ dataDir, ...(dataDir === 'memory://' ? { loadDataDir: await loadTemplate() } : {}) })
      try {
        expect(await sharedBuffers(db)).toBe('48MB')
      } finally {
        await db.close()
      }
    }
  })

  it('takes KBIS_PGLITE_SHARED_BUFFERS_MB as the server opens its store', async () => {
    const db = await openStore(loadConfig({ KBIS_DATA_DIR: await templateDataDir(path.join(root, 'configured')), KBIS_PGLITE_SHARED_BUFFERS_MB: '128' }))
    try {
      expect(await sharedBuffers(db)).toBe('128MB')
      // Migrated and usable, as `kbis serve` opens it.
      expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM assets')).rows).toEqual([{ n: 0 }])
    } finally {
      await db.close()
    }
  })

  it('refuses a size outside 16 to 1024 MB', () => {
    for (const bad of ['8', '0', '2048', '64MB', 'lots']) {
      expect(() => loadConfig({ KBIS_PGLITE_SHARED_BUFFERS_MB: bad }), bad).toThrow(ConfigError)
    }
    expect(() => loadConfig({ KBIS_PGLITE_SHARED_BUFFERS_MB: '8' })).toThrow('KBIS_PGLITE_SHARED_BUFFERS_MB: must be an integer from 16 to 1024, got "8"')
    expect(loadConfig({ KBIS_PGLITE_SHARED_BUFFERS_MB: '16' }).pgliteSharedBuffersMb).toBe(16)
  })
})

/**
 * An index build or a VACUUM takes `maintenance_work_mem` before it works on disk, and the
 * WebAssembly memory it grows into is never handed back: 16 MB on PGlite, not PostgreSQL's 64.
 */
describe('pglite: maintenance work memory', { timeout: 180_000 }, () => {
  it('is 16 MB, so an index built over 300,000 rows leaves the WebAssembly memory as it was', async () => {
    expect(PGLITE_MAINTENANCE_WORK_MEM_MB).toBe(16)
    const db = await openDb({ dataDir: 'memory://', loadDataDir: await loadTemplate() })
    const wasmMemory = (): Promise<number> => (db as unknown as { wasmMemoryBytes(): Promise<number> }).wasmMemoryBytes()
    try {
      expect((await db.query<{ maintenance_work_mem: string }>('SHOW maintenance_work_mem')).rows[0]!.maintenance_work_mem).toBe('16MB')
      await db.query('CREATE TABLE wide (org uuid, id uuid, name text)')
      for (let i = 0; i < 3; i++) {
        await db.query(`INSERT INTO wide SELECT '01a225fb-bcf0-74bc-b511-37ff163b0843', gen_random_uuid(), 'srv-' || lpad((n * 7919 % 1000000)::text, 7, '0')
                        FROM generate_series(1, 100000) n`)
      }
      const before = await wasmMemory()
      await db.query('CREATE INDEX ON wide (org, name, id)')
      await db.query('VACUUM ANALYZE wide')
      // With PostgreSQL's 64 MB: 26 MB more (128 → 154 MB).
      expect((await wasmMemory()) - before).toBeLessThan(8 * MB)
    } finally {
      await db.close()
    }
  })
})
