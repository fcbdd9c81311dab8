import { readFile } from 'node:fs/promises'
import { isUtf8 } from 'node:buffer'
import path from 'node:path'
import { parseDocument } from 'yaml'
import type { Issue } from '../core/errors.js'
import { losesDigits, unstorableParsed, unstorableValues } from '../core/json-values.js'
import { fieldPath } from './schema.js'
import { SetupError, type SetupFile } from './types.js'
import { validateSetup } from './validate.js'

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
  // Integers are read as BigInt, so that one a float cannot hold (a bound of 9007199254740993) is
  // refused as the API refuses it in a body, not rounded.
  const doc = parseDocument(text, { intAsBigInt: true })
  const error = doc.errors[0]
  // The library's own words name its API ("please use YAML.parseAllDocuments()").
  if (error?.code === 'MULTIPLE_DOCS') {
    const pos = error.linePos?.[0]
    throw new SetupError(`${source}: ${pos ? `line ${pos.line}: ` : ''}the file holds several YAML documents (a line ---); it describes one organization: one document per file`)
  }
  if (error) {
    const pos = error.linePos?.[0]
    const where = pos ? `line ${pos.line}, column ${pos.col}: ` : ''
    // The message repeats the position and quotes the source on further lines: keep the reason.
    throw new SetupError(`${source}: ${where}${firstLine(error.message).replace(/ at line \d+, column \d+:?$/, '')}`)
  }
  const inexact: string[] = []
  let data: unknown
  try {
    data = doc.toJS({
      reviver: (_key, value) => {
        if (typeof value !== 'bigint') return value
        if (losesDigits(String(value))) inexact.push(String(value))
        return Number(value)
      },
    })
  } catch (err) {
    // Aliases: one inside its own anchor (endless), one before its anchor, or so many that they
    // multiply the file (the library's guard against an "alias bomb").
    const reason = err instanceof RangeError ? 'an alias refers to a node that holds it (*a inside &a), which has no end' : firstLine((err as Error).message)
    throw new SetupError(`${source}: ${reason}`)
  }
  refuseUnstorable(unstorableParsed(data, inexact), source)
  return data
}

/**
 * A value the store cannot keep as written (NUL or a lone surrogate in text, a number past a
 * float's range, an integer that loses digits) is refused as in an API body (core/json-values.ts),
 * never stored as something else.
 */
function refuseUnstorable(issues: Issue[], source: string): void {
  const issue = issues[0]
  // The advice on a text property is for API bodies: a bound in a set-up file has no text form.
  if (issue) throw new SetupError(`${source}: ${issue.pointer ? `${fieldPath(issue.pointer)}: ` : ''}${issue.detail.replace(/; no number property can hold it \(a text property takes it sent as a string\)$/, '')}`)
}

function parseJson(text: string, source: string): unknown {
  let data: unknown
  try {
    data = JSON.parse(text) as unknown
  } catch (err) {
    // Node names a character offset ("… in JSON at position 30"), or quotes the text around the
    // fault ("Unexpected token '}', "{ "a": }" is not valid JSON"): the line and column, as for YAML.
    const message = (err as Error).message
    const at = / (?:in|after) JSON at position (\d+)/.exec(message)
    const reason = firstLine(at ? message.slice(0, at.index) + (/ after JSON/.test(at[0]) ? ' after the JSON value' : '') : message.replace(/, ".*" is not valid JSON$/s, ''))
    let where = ''
    if (at) {
      const before = text.slice(0, Number(at[1])).split('\n')
      where = `line ${before.length}, column ${before.at(-1)!.length + 1}: `
    } else {
      const pos = parseDocument(text).errors[0]?.linePos?.[0]
      if (pos) where = `line ${pos.line}, column ${pos.col}: `
    }
    throw new SetupError(`${source}: invalid JSON: ${where}${reason}`)
  }
  refuseUnstorable(unstorableValues(text, data), source)
  refuseDuplicateMembers(text, source)
  return data
}

/**
 * JSON.parse keeps the last of two members with one name, silently (`"organization"` twice: the
 * first is lost); YAML refuses a repeated key, and so does a JSON file. The YAML parser, which
 * reads JSON too, finds it with its line.
 */
function refuseDuplicateMembers(text: string, source: string): void {
  let error
  try {
    error = parseDocument(text).errors.find((e) => e.code === 'DUPLICATE_KEY')
  } catch {
    return // nested past the YAML parser's stack: JSON.parse read it, and other checks bound it
  }
  if (!error) return
  const pos = error.linePos?.[0]
  throw new SetupError(`${source}: invalid JSON: ${pos ? `line ${pos.line}, column ${pos.col}: ` : ''}a member is named twice in one object (the first would be lost)`)
}

/** Parses the text of a set-up file; `source` names it in error messages. */
export function parseSetup(text: string, source: string, format: SetupFormat): SetupFile {
  // A file of white space (or, in YAML, comments) only is empty: said so, not "must be an object".
  const empty = (): never => {
    throw new SetupError(`${source}: the file is empty: it describes one organization (organization, access_domains, roles, users, metamodel; see examples/acme.yaml)`)
  }
  if (text.trim() === '') empty()
  const data = format === 'yaml' ? parseYaml(text, source) : parseJson(text, source)
  if (data === null || data === undefined) empty()
  return validateSetup(data, source)
}

/**
 * Reads, parses (by extension: .yaml, .yml, .json) and validates a set-up file.
 * Throws `SetupError` with one line naming the file and the field, e.g.
 * `acme.yaml: metamodel.asset_types[0].properties[2].type: must be one of text, long_text, …`.
 */
export async function loadSetupFile(file: string): Promise<SetupFile> {
  const format = formatOf(file)
  let bytes: Buffer
  try {
    bytes = await readFile(file)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    throw new SetupError(`${file}: cannot read the file (${code})`)
  }
  // Read as UTF-8 regardless, a Latin-1 "é" would become U+FFFD and be applied as such.
  if (!isUtf8(bytes)) throw new SetupError(`${file}: is not UTF-8 text (saved in another encoding, such as Windows-1252?): save it as UTF-8`)
  return parseSetup(bytes.toString('utf8'), file, format)
}
