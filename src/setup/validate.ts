import { checkRules } from './checks.js'
import { fillScoreBounds, normalizeSetup } from './normalize.js'
import { checkReferences } from './references.js'
import { firstShapeError } from './schema.js'
import { SetupError, type SetupFile } from './types.js'

// Apart from the files' parsers (setup/load.ts): the server applies set-ups it is given as data
// (the control socket's `kbis apply`) and does not load a YAML parser for it.

/**
 * Validates parsed data and fills in defaults. Checks shape, rules and references within the file;
 * references into sections the file does not list are checked by `applySetup` against the store.
 */
export function validateSetup(data: unknown, source?: string): SetupFile {
  const fail = (message: string): never => {
    throw new SetupError(source ? `${source}: ${message}` : message)
  }
  const shape = firstShapeError(data)
  if (shape) fail(shape)
  const setup = normalizeSetup(data as Record<string, unknown>, source)
  const problem = checkRules(setup) ?? checkReferences(setup, null)
  if (problem) fail(problem)
  fillScoreBounds(setup)
  return setup
}
