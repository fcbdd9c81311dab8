// Copies the non-TypeScript files the service reads at run time (SQL migrations, the console's
// templates and static files) into dist/, then stamps the build (scripts/build-if-stale.mjs
// compares the sources' times with the stamp's).
import { cpSync, writeFileSync } from 'node:fs'

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true })
cpSync('src/console/views', 'dist/console/views', { recursive: true })
cpSync('src/console/static', 'dist/console/static', { recursive: true })
writeFileSync('dist/.build-stamp', `${new Date().toISOString()}\n`)
