// Packs dist/pglite-template.tgz, the PGlite data directory that a first start unpacks instead of
// running initdb and every migration (≈ 6 s of WebAssembly work): a directory initialized in a
// child process, migrated and closed cleanly by the built store code, so the template is what a
// first start used to make. Skipped when the template at hand was packed from the same PGlite
// version and migrations (dist/pglite-template.tgz.json). Decision 0022.
import { mkdtempSync, readFileSync, renameSync, rmSync, readdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { c } from 'tar'
import { openDb } from '../dist/store/db.js'
import { migrate } from '../dist/store/migrate.js'
import { packedTemplate, templateKey, TEMPLATE_FILE, TEMPLATE_KEY_FILE, VERSION_FILE } from '../dist/store/pglite-template.js'
import { LOCK_FILE } from '../dist/store/pglite-lock.js'

const key = templateKey()
const packed = packedTemplate()
if (packed && packed.pglite === key.pglite && packed.migrations === key.migrations) process.exit(0)

// Without the old one, openDb initializes the directory (its child-process initdb).
rmSync(TEMPLATE_KEY_FILE, { force: true })
rmSync(TEMPLATE_FILE, { force: true })
const dir = mkdtempSync(path.join(os.tmpdir(), 'kbis-template-'))
try {
  const db = await openDb({ dataDir: dir })
  await migrate(db)
  await db.close()
  const partial = `${TEMPLATE_FILE}.${process.pid}.partial`
  await c({ gzip: true, file: partial, cwd: dir, portable: true }, readdirSync(dir).filter((name) => name !== LOCK_FILE))
  renameSync(partial, TEMPLATE_FILE)
  writeFileSync(TEMPLATE_KEY_FILE, `${JSON.stringify({ ...key, pg_version: readFileSync(path.join(dir, VERSION_FILE), 'utf8') })}\n`)
  process.stdout.write(`kbis: packed the PGlite data directory template (dist/${path.basename(TEMPLATE_FILE)})\n`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
