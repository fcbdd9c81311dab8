import { commonErrorResponses, errorEnvelopeSchema, listEnvelope, recordEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'
import { LEVELS } from '../core/auth/levels.js'
import { KEY_DESCRIPTION_MAX_LENGTH, KEY_NAME_MAX_LENGTH } from '../keys/limits.js'

const nullableString = { type: ['string', 'null'] } as const
const timestamp = { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] } as const
const KEY_TYPES = ['Viewer', 'Editor', 'Admin'] as const

const apiKeyProperties = {
  id: { type: 'string', format: 'uuid' },
  name: { type: 'string' },
  description: nullableString,
  permission_type: { type: 'string', enum: KEY_TYPES, description: 'Effective type = min(this, the owner user\'s type).' },
  role_keys: { type: 'array', items: { type: 'string' } },
  owner_user_id: { type: 'string', format: 'uuid' },
  secret_prefix: { type: 'string', description: 'The start of the token as shown (kbis_<12 hex>), to recognise a key: the secret begins with it.' },
  created_at: timestamp,
  updated_at: timestamp,
  last_used_at: { type: ['string', 'null'], format: 'date-time', description: 'Updated in batches, a few seconds late.' },
} as const
const apiKeyRequired = Object.keys(apiKeyProperties)

export const apiKeySchema = { type: 'object', required: apiKeyRequired, properties: apiKeyProperties } as const

export const createdApiKeySchema = {
  type: 'object',
  required: [...apiKeyRequired, 'secret'],
  properties: {
    ...apiKeyProperties,
    secret: { type: 'string', description: 'The whole token, shown only in this response: send it as "Authorization: Bearer <secret>".' },
  },
} as const

const keyFields = {
  name: { type: 'string', minLength: 1, maxLength: KEY_NAME_MAX_LENGTH },
  description: { type: ['string', 'null'], maxLength: KEY_DESCRIPTION_MAX_LENGTH },
  permission_type: { type: 'string', enum: KEY_TYPES, description: 'At most the creating key\'s effective type.' },
  role_keys: {
    type: 'array', minItems: 1, maxItems: 100, uniqueItems: true, items: { type: 'string', minLength: 1 },
    description: 'Roles the owner user has.',
  },
  owner_user_id: { type: 'string', description: 'Admin keys only; defaults to the calling key\'s owner. On PATCH: transfer.' },
} as const

export const apiKeyCreateBody = {
  type: 'object',
  required: ['name', 'permission_type', 'role_keys'],
  additionalProperties: false,
  properties: keyFields,
} as const

export const apiKeyPatchBody = { type: 'object', additionalProperties: false, properties: keyFields } as const

export const grantSchema = {
  type: 'object',
  required: ['access_domain_key', 'asset_type_keys', 'level'],
  properties: {
    access_domain_key: { type: ['string', 'null'], description: 'A domain key, null (assets without a domain) or "*" (every domain and none).' },
    asset_type_keys: { type: 'array', items: { type: 'string' }, description: '["*"] or a list of asset type keys.' },
    level: { type: 'string', enum: LEVELS },
  },
} as const

export const roleSchema = {
  type: 'object',
  required: ['key', 'name', 'description', 'grants'],
  properties: { key: { type: 'string' }, name: { type: 'string' }, description: nullableString, grants: { type: 'array', items: grantSchema } },
} as const

export const accessDomainSchema = {
  type: 'object',
  required: ['key', 'name', 'description'],
  properties: { key: { type: 'string' }, name: { type: 'string' }, description: nullableString },
} as const

export const userSchema = {
  type: 'object',
  required: ['id', 'email', 'name', 'permission_type', 'role_keys', 'enabled', 'sign_in_methods', 'created_at'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    email: { type: 'string' },
    name: { type: 'string' },
    permission_type: { type: 'string', enum: [...KEY_TYPES, 'Owner'] },
    role_keys: { type: 'array', items: { type: 'string' } },
    enabled: { type: 'boolean' },
    sign_in_methods: { type: 'array', items: { type: 'string' }, description: 'Empty: the user\'s keys stop working.' },
    created_at: timestamp,
  },
} as const

export const listQuery = { type: 'object', additionalProperties: false, properties: pageQuerySchema() } as const
export const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const
export const keyParams = { type: 'object', required: ['key'], properties: { key: { type: 'string' } } } as const

const notFound = { ...errorEnvelopeSchema, description: 'Unknown or not visible to this key (not_found)' }
const invalid = { ...errorEnvelopeSchema, description: 'Unknown role or owner user (validation_failed)' }

export const adminResponses = {
  keys: { 200: listEnvelope(apiKeySchema), ...commonErrorResponses },
  key: { 200: recordEnvelope(apiKeySchema), 404: notFound, ...commonErrorResponses },
  created: { 201: recordEnvelope(createdApiKeySchema), 422: invalid, ...commonErrorResponses },
  patched: { 200: recordEnvelope(apiKeySchema), 404: notFound, 422: invalid, ...commonErrorResponses },
  deleted: { 204: { type: 'null', description: 'Deleted; the key stops working at once' }, 404: notFound, ...commonErrorResponses },
  roles: { 200: listEnvelope(roleSchema), ...commonErrorResponses },
  role: { 200: recordEnvelope(roleSchema), 404: notFound, ...commonErrorResponses },
  domains: { 200: listEnvelope(accessDomainSchema), ...commonErrorResponses },
  domain: { 200: recordEnvelope(accessDomainSchema), 404: notFound, ...commonErrorResponses },
  users: { 200: listEnvelope(userSchema), ...commonErrorResponses },
  user: { 200: recordEnvelope(userSchema), 404: notFound, ...commonErrorResponses },
}
