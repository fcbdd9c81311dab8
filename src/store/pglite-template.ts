import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { runNodeScript } from './node-child.js'

const require = createRequire(import.meta.url)

/**
 * A new PGlite data directory unpacked from a template instead of initialized: a directory that
 * PGlite's initdb created and every migration of this build has run on, closed cleanly and packed
 * at build time (scripts/pglite-template.mjs, `npm run build`) beside the built code, as
 * dist/pglite-template.tgz. A first start then takes a second, where initdb and the migrations
 * took ≈ 6 s of WebAssembly work. Decision 0022.
 *
 * Run from the sources (tsx) there is no template, and a template packed by another PGlite
 * version is not used: the directory is initialized as before (store/pglite-init.ts).
 */
export const TEMPLATE_FILE = fileURLToPath(new URL('../pglite-template.tgz', import.meta.url))
/** What the template was packed from: the PGlite version and the migrations (templateKey). */
export const TEMPLATE_KEY_FILE = `${TEMPLATE_FILE}.json`

export interface TemplateKey {
  pglite: string
  migrations: string
}

/** The key file: the key, and the template's PG_VERSION text (unpacked last, unpackTemplate). */
export interface PackedTemplate extends TemplateKey {
  pg_version: string
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations')

/** The installed PGlite's version. */
function pgliteVersion(): string {
  const pkg = path.join(path.dirname(require.resolve('@electric-sql/pglite')), '..', 'package.json')
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version
}

/** The installed PGlite's version and a digest of this build's migrations (names and texts). */
export function templateKey(): TemplateKey {
  const digest = createHash('sha256')
  for (const file of readdirSync(MIGRATIONS_DIR).sort()) digest.update(file).update('\0').update(readFileSync(path.join(MIGRATIONS_DIR, file))).update('\0')
  return { pglite: pgliteVersion(), migrations: digest.digest('hex') }
}

/** A template archive and its key file: the build's (TEMPLATE_FILE) unless a test names another. */
export interface TemplateFiles {
  file: string
  keyFile: string
}

const BUILD_TEMPLATE: TemplateFiles = { file: TEMPLATE_FILE, keyFile: TEMPLATE_KEY_FILE }

/** What the template at hand was packed with; null when there is none (or it cannot be read). */
export function packedTemplate(template = BUILD_TEMPLATE): PackedTemplate | null {
  if (!existsSync(template.file) || !existsSync(template.keyFile)) return null
  try {
    const packed = JSON.parse(readFileSync(template.keyFile, 'utf8')) as PackedTemplate
    return typeof packed.pg_version === 'string' ? packed : null
  } catch {
    return null
  }
}

/**
 * PostgreSQL, and store/pglite-init.ts, tell an initialized directory by this file. The archive
 * holds it too, but it is written from the key file once the rest is unpacked: an unpacking cut
 * short leaves a directory without it, which the next start initializes again.
 */
export const VERSION_FILE = 'PG_VERSION'

/** How long unpacking may take (a second on an idle machine). */
const UNPACK_TIMEOUT_MS = 120_000

// Run by `node -e` with the tar package's path, the archive and the directory: every entry but
// PG_VERSION. Synchronously: the child does nothing else, and tar's synchronous extraction took
// half the time and CPU of its streaming one (0.8–1.4 s against 2.0–2.6 s for the 1,114 files).
// An entry tar cannot write (a full disk) is only a warning to tar: it fails the unpacking here,
// or the directory would get its PG_VERSION with files missing. (Its notes, TAR_ENTRY_INFO, such
// as "stripping / from absolute path", are not failures.)
const UNPACK_SCRIPT = `const [tar, file, cwd, skip] = process.argv.slice(1)
try {
  let failure = null
  const onwarn = (code, message) => { if (code !== 'TAR_ENTRY_INFO') failure = failure || String(message) }
  require(tar).x({ sync: true, file, cwd, onwarn, filter: (entry) => entry.replace(/^(?:\\.?\\/)+/, '') !== skip })
  if (failure) throw new Error(failure)
} catch (err) {
  process.stderr.write(String((err && err.message) || err))
  process.exitCode = 1
}`

/**
 * Unpacks the template into the new data directory `dir` (locked, without PG_VERSION) and says
 * whether it did: false when there is no template for the installed PGlite. A template of older
 * migrations is used too (the store's migrate() runs the rest, as on any directory).
 *
 * The unpacking runs in a short-lived child process: gunzip and tar hand 40 MB through chunks of
 * tens of kB, and in the server's process the allocator kept ≈ 40 MB of its main heap resident
 * after them for good (freed, but not at the heap's top), a third of the memory of a server on
 * PGlite that had just started on a new directory.
 */
export async function unpackTemplate(dir: string, template = BUILD_TEMPLATE): Promise<boolean> {
  const packed = packedTemplate(template)
  if (!packed || packed.pglite !== pgliteVersion()) return false
  const args = [require.resolve('tar'), path.resolve(template.file), path.resolve(dir), VERSION_FILE]
  await runNodeScript(UNPACK_SCRIPT, args, UNPACK_TIMEOUT_MS, `could not unpack the PGlite data directory template into ${dir}`)
  writeFileSync(path.join(dir, VERSION_FILE), packed.pg_version)
  return true
}
