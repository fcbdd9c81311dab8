import { readFileSync } from 'node:fs'

/** The version of kbis: package.json's (beside src/ and dist/ alike). */
export const KBIS_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
