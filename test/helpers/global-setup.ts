import { execFileSync } from 'node:child_process'
import { ensureTemplate } from './pglite-template.js'

/**
 * Once per `vitest run`, before any worker starts: dist/ rebuilt if a source is newer than the
 * last build (the CLI tests run bin/kbis.js, as users do), and the migrated PGlite template
 * every file loads.
 */
export default async function setup(): Promise<void> {
  execFileSync(process.execPath, ['scripts/build-if-stale.mjs'], { stdio: 'inherit' })
  await ensureTemplate()
}
