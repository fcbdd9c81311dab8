// `npm start`'s prestart: rebuilds dist/ only when a source is newer than the last build, so a
// start after `npm install` (whose prepare built already) takes seconds, not a TypeScript build.
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { execSync } from 'node:child_process'

export const STAMP = 'dist/.build-stamp'
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/copy-assets.mjs', 'scripts/pglite-template.mjs']

function newest(path) {
  if (!existsSync(path)) return 0
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((max, name) => Math.max(max, newest(join(path, name))), 0)
}

const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0
const changed = INPUTS.reduce((max, path) => Math.max(max, newest(path)), 0)
if (built === 0 || changed > built) {
  process.stdout.write(built === 0 ? 'kbis: building dist/ (first start)\n' : 'kbis: sources changed since the last build; rebuilding dist/\n')
  execSync('npm run build', { stdio: 'inherit' })
}
