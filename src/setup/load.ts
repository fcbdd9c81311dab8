import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { parseDocument } from 'yaml'
import { checkRules } from './checks.js'
import { fillScoreBounds, normalizeSetup } from './normalize.js'
import { checkReferences } from './references.js'
import { firstShapeError } from './schema.js'
import { SetupError, type SetupFile } from './types.js'

export { SetupError } from './types.js'
export type { SetupFile } from './types.js'

export type SetupFormat = 'yaml' | 'json'

function formatOf(file: string): SetupFormat {
  const ext = path.extname(file).toLowerCase()
  if (ext === '.yaml' || ext === '.yml') return 'yaml'
  if (ext === '.json') return 'json'
  throw new SetupError(`${file}: unsupported file type "${ext}" (use .yaml, .yml or .json)`)
}

function firstLine(message: string): string {
  return message.split('\n')[0]!.trim()
}

function parseYaml(text: string, source: string): unknown {
  // `uniqueKeys` (on by default) makes a repeated mapping key an error rather than a silent overwrite.
  const doc = parseDocument(text)
  const error = doc.errors[0]
  if (error) {
    const pos = error.linePos?.[0]
    const where = pos ? `line ${pos.line}, column ${pos.col}: ` : ''
    // The message repeats the position and quotes the source on further lines: keep the reason.
    throw new SetupError(`${source}: ${where}${firstLine(error.message).replace(/ at line \d+, column \d+:?$/, '')}`)
  }
  return doc.toJS()
}

function parseJson(text: string, source: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (err) {
    throw new SetupError(`${source}: invalid JSON: ${firstLine((err as Error).message)}`)
  }
}

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

/** Parses the text of a set-up file; `source` names it in error messages. */
export function parseSetup(text: string, source: string, format: SetupFormat): SetupFile {
  const data = format === 'yaml' ? parseYaml(text, source) : parseJson(text, source)
  return validateSetup(data, source)
}

/**
 * Reads, parses (by extension: .yaml, .yml, .json) and validates a set-up file.
 * Throws `SetupError` with one line naming the file and the field, e.g.
 * `acme.yaml: metamodel.asset_types[0].properties[2].type: must be one of text, long_text, …`.
 */
export async function loadSetupFile(file: string): Promise<SetupFile> {
  const format = formatOf(file)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    throw new SetupError(`${file}: cannot read the file (${code})`)
  }
  return parseSetup(text, file, format)
}
