import { ensureTemplate } from './pglite-template.js'

/** Once per `vitest run`, before any worker starts: the migrated PGlite template every file loads. */
export default async function setup(): Promise<void> {
  await ensureTemplate()
}
