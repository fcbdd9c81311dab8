import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { isAddressOrRange } from '../core/ip-ranges.js'
import { LEVELS } from '../core/auth/levels.js'
import { KEY_PATTERN, PROPERTY_TYPES } from '../metamodel/types.js'
import { USER_PERMISSION_TYPES } from './types.js'

export type { SetupFile } from './types.js'

/** Largest value of a PostgreSQL `integer` column (rate limits are stored in two of them). */
const MAX_INT4 = 2_147_483_647

const key = {
  type: 'string',
  pattern: KEY_PATTERN.source,
  errorText: 'must be a key: a lowercase letter, then up to 62 lowercase letters, digits or _',
}
const name = { type: 'string', minLength: 1 }
const description = { type: ['string', 'null'] }
const keyList = { type: 'array', items: key, uniqueItems: true }
const positiveInt = { type: 'integer', minimum: 1, maximum: MAX_INT4 }

function object(properties: Record<string, unknown>, required: string[] = []): Record<string, unknown> {
  return { type: 'object', properties, required, additionalProperties: false }
}

const organization = object(
  {
    key,
    name,
    api_access: { type: 'boolean' },
    rate_limit: object({ requests: positiveInt, window_seconds: positiveInt }),
    ip_allowlist: {
      type: 'array',
      uniqueItems: true,
      items: { type: 'string', format: 'allowlist-entry', errorText: 'must be an IPv4 or IPv6 address or CIDR range' },
    },
  },
  ['key'],
)

const grant = object(
  {
    access_domain_key: {
      type: ['string', 'null'],
      pattern: `^(\\*|${KEY_PATTERN.source.slice(1, -1)})$`,
      errorText: 'must be an access domain key, null (assets without a domain) or "*" (every domain and none)',
    },
    asset_type_keys: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: {
        type: 'string',
        pattern: `^(\\*|${KEY_PATTERN.source.slice(1, -1)})$`,
        errorText: 'must be an asset type key or "*"',
      },
    },
    level: { enum: [...LEVELS] },
  },
  ['access_domain_key', 'asset_type_keys', 'level'],
)

const property = object(
  {
    key,
    name,
    description,
    type: { enum: [...PROPERTY_TYPES] },
    required: { type: 'boolean' },
    // null = not set: a SetupFile (defaults filled in) passes this schema again unchanged.
    options: { type: ['array', 'null'], minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1 } },
    currency: {
      type: ['string', 'null'],
      pattern: '^[A-Z]{3}$',
      errorText: 'must be a 3-letter ISO 4217 code in capitals, e.g. EUR',
    },
    min: { type: ['number', 'null'] },
    max: { type: ['number', 'null'] },
  },
  ['key', 'type'],
)

/** The set-up file of `kbis apply` (docs/configuration.md describes every field). */
export const setupSchema = object(
  {
    organization,
    access_domains: { type: 'array', items: object({ key, name, description }, ['key']) },
    roles: { type: 'array', items: object({ key, name, description, grants: { type: 'array', items: grant } }, ['key', 'grants']) },
    users: {
      type: 'array',
      items: object(
        {
          email: { type: 'string', format: 'email', errorText: 'must be an email address' },
          name,
          permission_type: { enum: [...USER_PERMISSION_TYPES] },
          role_keys: keyList,
          enabled: { type: 'boolean' },
          sign_in_methods: { type: 'array', uniqueItems: true, items: { type: 'string', minLength: 1 } },
        },
        ['email', 'name', 'permission_type'],
      ),
    },
    metamodel: object({
      asset_types: {
        type: 'array',
        items: object({ key, name, description, properties: { type: 'array', items: property } }, ['key']),
      },
      relationship_types: {
        type: 'array',
        items: object({ key, name, description, source_asset_type_keys: keyList, target_asset_type_keys: keyList }, ['key']),
      },
    }),
  },
  ['organization'],
)

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true })
addFormats.default(ajv, ['email'])
ajv.addFormat('allowlist-entry', isAddressOrRange)
// An annotation only: the message shown when the value breaks its pattern or format.
ajv.addKeyword({ keyword: 'errorText', schemaType: 'string' })

/**
 * Compiled once, on first use (≈ 0.2 s): not at import, which every `kbis serve` does (its control
 * socket applies setup files) whether or not a file is ever applied.
 */
let validateSetupShape: ValidateFunction | null = null

/** `/metamodel/asset_types/0/properties/2/type` → `metamodel.asset_types[0].properties[2].type`. */
export function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((acc, s) => (/^\d+$/.test(s) ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '')
}

function join(path: string, field: string): string {
  return path ? `${path}.${field}` : field
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string', integer: 'an integer', number: 'a number', boolean: 'true or false',
  object: 'an object', array: 'a list', null: 'null',
}

function describeType(type: unknown): string {
  const types = Array.isArray(type) ? type : [type]
  return `must be ${types.map((t) => TYPE_NAMES[String(t)] ?? String(t)).join(' or ')}`
}

function customText(error: ErrorObject): string | undefined {
  const text = (error.parentSchema as { errorText?: unknown } | undefined)?.errorText
  return typeof text === 'string' ? text : undefined
}

/** One Ajv error as `field.path: message`. */
export function describeShapeError(error: ErrorObject): string {
  const path = fieldPath(error.instancePath)
  const at = (message: string): string => (path ? `${path}: ${message}` : message)
  const p = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'required':
      return `${join(path, String(p.missingProperty))}: is required`
    case 'additionalProperties':
      return `${join(path, String(p.additionalProperty))}: is not a known field`
    case 'type':
      return at(describeType(p.type))
    case 'enum':
      return at(`must be one of ${(p.allowedValues as unknown[]).map((v) => String(v)).join(', ')}`)
    case 'minLength':
      return at('must not be empty')
    case 'minItems':
      return at(`must list at least ${String(p.limit)} item${p.limit === 1 ? '' : 's'}`)
    case 'uniqueItems': {
      const repeated = (error.data as unknown[])[Number(p.j)]
      return at(`must not list ${JSON.stringify(repeated)} twice`)
    }
    case 'minimum': case 'maximum': case 'exclusiveMinimum': case 'exclusiveMaximum':
      return at(`must be ${String(p.comparison).replace('>=', '≥').replace('<=', '≤')} ${String(p.limit)}`)
    case 'pattern': case 'format':
      return at(customText(error) ?? `must match ${String(p.pattern ?? p.format)}`)
    default:
      return at(error.message ?? 'is not valid')
  }
}

/** The first shape error of `data` as one line, or null when the shape is right. */
export function firstShapeError(data: unknown): string | null {
  const validate = (validateSetupShape ??= ajv.compile(setupSchema))
  if (validate(data)) return null
  const error = validate.errors?.[0]
  return error ? describeShapeError(error) : 'is not valid'
}
