// Copies the non-TypeScript files the service reads at run time (SQL migrations) into dist/, then
// stamps the build (scripts/build-if-stale.mjs compares the sources' times with the stamp's).
import { cpSync, writeFileSync } from 'node:fs'

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true })
writeFileSync('dist/.build-stamp', `${new Date().toISOString()}\n`)
