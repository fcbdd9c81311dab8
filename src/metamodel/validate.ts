import { Ajv, type ValidateFunction, type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import type { AssetType, PropertyDefinition } from './types.js'
import type { Issue } from '../core/errors.js'
import { MAX_INDEXED_TEXT } from '../core/schemas.js'
import { itemsWhenShort } from '../core/bounded-lists.js'

/**
 * White space in a unique_key value: JavaScript's `\s` (tab to carriage return, the Zs spaces, the
 * byte order mark, the line and paragraph separators) and U+0085 (NEXT LINE) of Unicode's
 * White_Space, which `\s` lacks. Spelt out as `\uXXXX` escapes rather than `\s` or `[:space:]`
 * because these patterns also run in SQL (setup/fit.ts), where `[:space:]` follows the server's
 * locale: the same text then means the same in Ajv's patterns and in PostgreSQL's.
 */
const WHITE_SPACE = '\\u0009-\\u000d\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff'

/** Characters a unique_key value may not contain (CONTRACT §2): it must be safe in a path. */
export const UNIQUE_KEY_PATTERN = `^[^:/?#\\[\\]@!$&'()*+,;=\\\\${WHITE_SPACE}]+$`

/**
 * A date property's value: exactly YYYY-MM-DD (the `date` format then rejects impossible days such
 * as 2026-02-30). Year 0000 is no date for PostgreSQL (no year 0), so it is excluded. `[0-9]`, not
 * `\d`: this pattern also runs in SQL (setup/fit.ts), where `\d` is the locale's digits.
 */
export const DATE_PATTERN = '^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}$'

/**
 * A url property's value: a URI (RFC 3986) as ajv-formats' `uri` format decides it: its pattern
 * as it is, with `[0-9]` for `\d` and both cases spelt out for its `i` flag, so that it runs in
 * SQL (setup/fit.ts) with the same meaning: `kbis apply` changing a property to `url` refuses
 * exactly the stored values the API refuses. test/unit/metamodel/patterns.test.ts checks it
 * against ajv-formats.
 */
export const URI_PATTERN = '^(?:[a-zA-Z][a-zA-Z0-9+\\-.]*:)(?:\\/?\\/(?:(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:]|%[0-9a-fA-F]{2})*@)?(?:\\[(?:(?:(?:(?:[0-9a-fA-F]{1,4}:){6}|::(?:[0-9a-fA-F]{1,4}:){5}|(?:[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}:){4}|(?:(?:[0-9a-fA-F]{1,4}:){0,1}[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}:){3}|(?:(?:[0-9a-fA-F]{1,4}:){0,2}[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}:){2}|(?:(?:[0-9a-fA-F]{1,4}:){0,3}[0-9a-fA-F]{1,4})?::[0-9a-fA-F]{1,4}:|(?:(?:[0-9a-fA-F]{1,4}:){0,4}[0-9a-fA-F]{1,4})?::)(?:[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}|(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?))|(?:(?:[0-9a-fA-F]{1,4}:){0,5}[0-9a-fA-F]{1,4})?::[0-9a-fA-F]{1,4}|(?:(?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-fA-F]{1,4})?::)|[Vv][0-9a-fA-F]+\\.[a-zA-Z0-9\\-._~!$&\'()*+,;=:]+)\\]|(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)|(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=]|%[0-9a-fA-F]{2})*)(?::[0-9]*)?(?:\\/(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@]|%[0-9a-fA-F]{2})*)*|\\/(?:(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@]|%[0-9a-fA-F]{2})+(?:\\/(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@]|%[0-9a-fA-F]{2})*)*)?|(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@]|%[0-9a-fA-F]{2})+(?:\\/(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@]|%[0-9a-fA-F]{2})*)*)(?:\\?(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@/?]|%[0-9a-fA-F]{2})*)?(?:#(?:[a-zA-Z0-9\\-._~!$&\'()*+,;=:@/?]|%[0-9a-fA-F]{2})*)?$'

const ajv = new Ajv({ allErrors: true, strict: false })
addFormats.default(ajv, ['date'])
ajv.addFormat('uri', new RegExp(URI_PATTERN))

/**
 * JSON Schema of one property's value, from its definition. A required property's value may not
 * be empty either: `""` and `[]` are empty as a missing value is (CONTRACT §4's `is_empty`), so
 * they do not satisfy "required" (§2).
 */
export function propertyValueSchema(def: PropertyDefinition): Record<string, unknown> {
  const schema = valueSchema(def)
  if (!def.required) return schema
  if (schema.type === 'string' && schema.minLength === undefined) return { ...schema, minLength: 1 }
  if (schema.type === 'array') return { ...schema, minItems: 1 }
  return schema
}

function valueSchema(def: PropertyDefinition): Record<string, unknown> {
  const bounds = (): Record<string, unknown> => ({
    ...(def.min !== null ? { minimum: def.min } : {}),
    ...(def.max !== null ? { maximum: def.max } : {}),
  })
  switch (def.type) {
    case 'text': case 'long_text': case 'rich_text':
      return { type: 'string' }
    case 'url':
      return { type: 'string', format: 'uri' }
    case 'unique_key':
      return { type: 'string', minLength: 1, maxLength: MAX_INDEXED_TEXT, pattern: UNIQUE_KEY_PATTERN }
    case 'number': case 'currency':
      return { type: 'number', ...bounds() }
    case 'integer':
      return { type: 'integer', ...bounds() }
    case 'percentage':
      return { type: 'number', minimum: 0, maximum: 100 }
    case 'score':
      return { type: 'integer', minimum: def.min ?? 0, maximum: def.max ?? 5 }
    case 'date':
      // `format: date` alone would also take other shapes in some Ajv modes; the pattern pins
      // exactly YYYY-MM-DD and the format rejects impossible days such as 2026-02-30.
      return { type: 'string', pattern: DATE_PATTERN, format: 'date' }
    case 'boolean':
      return { type: 'boolean' }
    case 'select':
      return { type: 'string', enum: def.options ?? [] }
    case 'multi_select':
      // Distinct options: never more values than options.
      return { type: 'array', items: { type: 'string', enum: def.options ?? [] }, uniqueItems: true, maxItems: (def.options ?? []).length }
  }
}

/**
 * The JSON Schema of an asset type's whole `properties` object; `partial` (a PATCH's values to
 * set): no key is required, but a required property's value still may not be empty.
 */
export function propertiesSchema(type: AssetType, partial = false): Record<string, unknown> {
  return {
    type: 'object',
    properties: Object.fromEntries(type.properties.map((p) => [p.key, propertyValueSchema(p)])),
    required: partial ? [] : type.properties.filter((p) => p.required).map((p) => p.key),
    additionalProperties: false,
  }
}

/** Options named in a detail; beyond ten, where to read them all (every failing item repeated 250 of them: 100 MB answers). */
const OPTIONS_NAMED = 10

function optionsText(def: PropertyDefinition): string {
  const options = def.options ?? []
  if (options.length <= OPTIONS_NAMED) return options.join(', ')
  return `${options.slice(0, OPTIONS_NAMED).join(', ')}, … (${options.length} options: GET /api/v1/metamodel/asset-types/${def.asset_type_key} lists them)`
}

/** The range a number must fall in, as refusals write it: ` from 0 to 1000`, ` ≥ 1`, ` ≤ 64`, or nothing. */
export function boundsText(min: number | null, max: number | null): string {
  if (min !== null && max !== null) return ` from ${min} to ${max}`
  if (min !== null) return ` ≥ ${min}`
  if (max !== null) return ` ≤ ${max}`
  return ''
}

function expectation(def: PropertyDefinition): string {
  switch (def.type) {
    case 'date': return 'a date YYYY-MM-DD'
    case 'url': return 'a URL'
    case 'unique_key': return `a non-empty value of at most ${MAX_INDEXED_TEXT} characters without white space or any of : / ? # [ ] @ ! $ & ' ( ) * + , ; = \\`
    case 'integer': return `an integer${boundsText(def.min, def.max)}`
    case 'score': return `an integer from ${def.min ?? 0} to ${def.max ?? 5}`
    case 'percentage': return 'a number from 0 to 100'
    case 'number': case 'currency':
      return `a number${boundsText(def.min, def.max)}`
    case 'boolean': return 'true or false'
    case 'select': return `one of ${optionsText(def)}`
    case 'multi_select': return `a list of distinct values from ${optionsText(def)}`
    default: return 'a string'
  }
}

export type PropertiesValidator = (properties: Record<string, unknown>, pointer: string) => Issue[]

/** Compiles once per asset type (and metamodel version) a validator returning CONTRACT issues. */
export function compilePropertiesValidator(type: AssetType, partial = false): PropertiesValidator {
  // Lists checked item by item only within their length (core/bounded-lists.ts), as the routes' validators are.
  const validate: ValidateFunction = ajv.compile(itemsWhenShort(propertiesSchema(type, partial)))
  const defs = new Map(type.properties.map((p) => [p.key, p]))
  return (properties, pointer) => {
    if (validate(properties)) return []
    const seen = new Set<string>()
    const issues: Issue[] = []
    for (const error of validate.errors as ErrorObject[]) {
      const issue = describe(error, type, defs, pointer, properties)
      if (issue && !seen.has(issue.pointer!)) {
        seen.add(issue.pointer!)
        issues.push(issue)
      }
    }
    return issues
  }
}

/** A key of `properties` (at `pointer`) that the asset type does not define. */
export function unknownPropertyIssue(type: AssetType, key: string, pointer: string): Issue {
  return { detail: `${key} is not a property of asset type ${type.key}`, pointer: `${pointer}/${key}` }
}

function describe(error: ErrorObject, type: AssetType, defs: Map<string, PropertyDefinition>, pointer: string, properties: Record<string, unknown>): Issue | null {
  if (error.keyword === 'additionalProperties') return unknownPropertyIssue(type, String(error.params.additionalProperty), pointer)
  if (error.keyword === 'required') {
    const key = String(error.params.missingProperty)
    return { detail: `${key} is required for asset type ${type.key}`, pointer: `${pointer}/${key}` }
  }
  const key = error.instancePath.split('/')[1]
  const def = key !== undefined ? defs.get(key) : undefined
  if (!def) return null
  if (def.required && def.type !== 'unique_key' && (error.keyword === 'minLength' || error.keyword === 'minItems')) {
    return { detail: `${key} is required for asset type ${type.key}: an empty value (${def.type === 'multi_select' ? '[]' : '""'}) is none`, pointer: `${pointer}/${key}` }
  }
  // The shape is right but the day does not exist (2024-02-30, 2023-02-29, 2024-13-01): say so.
  const value = properties[key!]
  if (def.type === 'date' && typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) && !value.startsWith('0000')) {
    return { detail: `${key} must be ${expectation(def)}: ${value} is not a calendar date`, pointer: `${pointer}/${key}` }
  }
  return { detail: `${key} must be ${expectation(def)}`, pointer: `${pointer}/${key}` }
}
