import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { gzipSync } from 'node:zlib'
import { t } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDb } from '../../../src/store/db.js'
import { pendingMigrations } from '../../../src/store/migrate.js'
import { templateKey, unpackTemplate, type TemplateFiles } from '../../../src/store/pglite-template.js'
import { childFailure } from '../../../src/store/node-child.js'
import { ALLOCATOR_TUNABLES } from '../../../src/ops/heap.js'
import { ensureTemplate } from '../../helpers/pglite-template.js'

/**
 * A new data directory unpacked from a template (decision 0022): here the tests' own migrated
 * dump (test/helpers/pglite-template.ts) stands in for the build's dist/pglite-template.tgz.
 */
describe('pglite: a data directory from a template', { timeout: 180_000 }, () => {
  let root: string
  let template: TemplateFiles
  // The PostgreSQL major version the dump holds, as a build's key file records it.
  let pgVersion = ''
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'kbis-template-unit-'))
    template = { file: await ensureTemplate(), keyFile: path.join(root, 'key.json') }
    await t({ file: template.file, onReadEntry: (entry) => {
      if (entry.path.replace(/^\/+/, '') === 'PG_VERSION') entry.on('data', (chunk: Buffer) => (pgVersion += chunk.toString()))
      else entry.resume()
    } })
    expect(pgVersion).toMatch(/^\d+\n$/)
  })
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  const writeKey = (pglite: string) => writeFileSync(template.keyFile, JSON.stringify({ pglite, migrations: templateKey().migrations, pg_version: pgVersion }))
  const newDir = (name: string) => {
    const dir = path.join(root, name)
    mkdirSync(dir)
    return dir
  }

  it('unpacks a migrated directory that opens with nothing left to migrate, PG_VERSION from the key file', async () => {
    writeKey(templateKey().pglite)
    const dir = newDir('unpacked')
    expect(await unpackTemplate(dir, template)).toBe(true)
    expect(readFileSync(path.join(dir, 'PG_VERSION'), 'utf8')).toBe(pgVersion)
    const db = await openDb({ dataDir: dir })
    try {
      expect(await pendingMigrations(db)).toEqual([])
      expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations')).rows).toEqual([{ n: 0 }])
    } finally {
      await db.close()
    }
  })

  it('leaves the directory alone when the template was packed by another PGlite version, or is missing', async () => {
    writeKey('0.0.1')
    const dir = newDir('other-version')
    expect(await unpackTemplate(dir, template)).toBe(false)
    expect(await unpackTemplate(dir, { file: path.join(root, 'none.tgz'), keyFile: template.keyFile })).toBe(false)
    writeFileSync(template.keyFile, '{not json')
    expect(await unpackTemplate(dir, template)).toBe(false)
    expect(readdirSync(dir)).toEqual([])
  })

  it('says why when the archive cannot be unpacked, and leaves PG_VERSION unwritten', async () => {
    writeKey(templateKey().pglite)
    const broken = path.join(root, 'broken.tgz')
    writeFileSync(broken, Buffer.from('not a gzip archive at all, but long enough to be read as one'))
    const dir = newDir('broken')
    await expect(unpackTemplate(dir, { file: broken, keyFile: template.keyFile })).rejects.toThrow(/^could not unpack the PGlite data directory template into .*broken: .+/)
    expect(existsSync(path.join(dir, 'PG_VERSION'))).toBe(false)
    // A file that cannot be written (here a directory stands where it goes; on a full disk, ENOSPC):
    // tar only warned, the directory got its PG_VERSION, and every later start failed to open it.
    writeKey(templateKey().pglite)
    const blocked = newDir('blocked')
    mkdirSync(path.join(blocked, 'global', 'pg_control'), { recursive: true })
    writeFileSync(path.join(blocked, 'global', 'pg_control', 'in-the-way'), '')
    await expect(unpackTemplate(blocked, template)).rejects.toThrow(/^could not unpack the PGlite data directory template into .*blocked: .+/)
    expect(existsSync(path.join(blocked, 'PG_VERSION'))).toBe(false)
  })

  /**
   * In the server's process, gunzip and tar left ≈ 40 MB of glibc's main heap resident for good
   * (freed in chunks of tens of kB, not at the heap's top). Measured in a new process that runs
   * the built function as `kbis serve` does, with the launcher's allocator setting: the unpacking
   * happens in a child of it, so its own heap stays as it was.
   */
  it("unpacks in a child process: the caller's main heap does not keep the unpacking's memory", () => {
    writeKey(templateKey().pglite)
    const dir = newDir('heap')
    // Compressed, as the build packs it: gunzip's chunks are what the heap kept.
    const packed = { file: path.join(root, 'template.tgz'), keyFile: template.keyFile }
    writeFileSync(packed.file, gzipSync(readFileSync(template.file)))
    const built = pathToFileURL(path.resolve('dist/store/pglite-template.js')).href
    const script = `import { readFileSync } from 'node:fs'
import { unpackTemplate } from ${JSON.stringify(built)}
const heapKb = () => { const maps = readFileSync('/proc/self/smaps', 'utf8'); const at = maps.indexOf('[heap]'); return at < 0 ? 0 : Number(/Rss:\\s+(\\d+) kB/.exec(maps.slice(at))[1]) }
const before = heapKb()
const unpacked = await unpackTemplate(process.argv[1], JSON.parse(process.argv[2]))
process.stdout.write(JSON.stringify({ unpacked, grewKb: heapKb() - before }))`
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script, dir, JSON.stringify(packed)], { env: { ...process.env, GLIBC_TUNABLES: ALLOCATOR_TUNABLES }, encoding: 'utf8' })
    const { unpacked, grewKb } = JSON.parse(out) as { unpacked: boolean; grewKb: number }
    expect(unpacked).toBe(true)
    expect(readdirSync(dir)).toContain('PG_VERSION')
    expect(readdirSync(path.join(dir, 'base')).length).toBeGreaterThan(0)
    expect(grewKb).toBeLessThan(8 * 1024)
  })

  it("names a child's failure by its stderr, else by how it ended, never by its command line", () => {
    const failed = (fields: Record<string, unknown>) => Object.assign(new Error('Command failed: /usr/bin/node -e const [tar, file] = …'), fields)
    expect(childFailure(failed({ code: 1 }), '  TAR_BAD_ARCHIVE: Unrecognized archive format\n', 120_000)).toBe('TAR_BAD_ARCHIVE: Unrecognized archive format')
    expect(childFailure(failed({ killed: true, signal: 'SIGTERM' }), '', 120_000)).toBe('it did not finish within 120 s')
    expect(childFailure(failed({ code: 3 }), '', 120_000)).toBe('it exited with code 3')
    expect(childFailure(failed({ signal: 'SIGKILL' }), '', 120_000)).toBe('it ended by SIGKILL')
    expect(childFailure(failed({ code: 'ENOENT' }), '', 120_000)).toBe('it could not start (ENOENT)')
  })

  it('packs the current migrations and the installed PGlite with the build (dist/)', async () => {
    const built = JSON.parse(readFileSync('dist/pglite-template.tgz.json', 'utf8')) as Record<string, string>
    expect(existsSync('dist/pglite-template.tgz')).toBe(true)
    expect(built).toEqual({ ...templateKey(), pg_version: pgVersion })
  })
})
