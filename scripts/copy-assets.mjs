// Copies the non-TypeScript files the service reads at run time (SQL migrations) into dist/.
import { cpSync } from 'node:fs'

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true })
