import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { t } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDb } from '../../../src/store/db.js'
import { pendingMigrations } from '../../../src/store/migrate.js'
import { templateKey, unpackTemplate, type TemplateFiles } from '../../../src/store/pglite-template.js'
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

  it('packs the current migrations and the installed PGlite with the build (dist/)', async () => {
    const built = JSON.parse(readFileSync('dist/pglite-template.tgz.json', 'utf8')) as Record<string, string>
    expect(existsSync('dist/pglite-template.tgz')).toBe(true)
    expect(built).toEqual({ ...templateKey(), pg_version: pgVersion })
  })
})
