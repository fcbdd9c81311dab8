import { AppError, Errors, type ErrorDef } from './errors.js'

/** JSON values and JSON pointers (RFC 6901): the one copy of each helper every body reader uses. */

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Escapes one reference token of a JSON pointer: `~` → `~0`, `/` → `~1`. */
export function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1')
}

/** Reads one reference token of a JSON pointer back: `~1` → `/`, `~0` → `~`. */
export function unescapePointer(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~')
}

/** Throws `def` with one issue pointing into the body. */
export function failAt(def: ErrorDef, pointer: string, detail: string): never {
  throw new AppError(def, [{ detail, pointer }])
}

/** Rejects members outside `allowed` (400 invalid_request), pointing at the first one below `at`. */
export function checkMembers(body: Record<string, unknown>, allowed: readonly string[], at = ''): void {
  const extra = Object.keys(body).find((key) => !allowed.includes(key))
  if (extra !== undefined) {
    failAt(Errors.INVALID_REQUEST, `${at}/${escapePointer(extra)}`, `unknown member "${extra}"; the body takes ${allowed.join(', ')}`)
  }
}
