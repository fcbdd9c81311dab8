import { commonErrorResponses, errorEnvelopeSchema, listEnvelope, recordEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'

/** An asset as embedded in another record (a related asset, a relationship end). */
export function assetSummarySchema(description: string) {
  return {
    type: 'object',
    description,
    required: ['id', 'asset_type_key', 'name', 'created_at', 'updated_at'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      asset_type_key: { type: 'string' },
      name: { type: 'string' },
      properties: { type: 'object', additionalProperties: true },
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
    },
  } as const
}

const endSchema = assetSummarySchema('An expanded end: with include=source_asset / target_asset; `properties` only with the `.properties` suffix.')

export const relationshipSchema = {
  type: 'object',
  required: ['id', 'relationship_type_key', 'source_asset_id', 'target_asset_id', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'string', format: 'uuid', description: 'Service ID (UUIDv7).' },
    relationship_type_key: { type: 'string' },
    source_asset_id: { type: 'string', format: 'uuid' },
    target_asset_id: { type: 'string', format: 'uuid' },
    created_at: { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] },
    updated_at: { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] },
    source_asset: endSchema,
    target_asset: endSchema,
  },
} as const

const assetRef = { type: 'string', minLength: 1, maxLength: 1000, description: 'UUID or composite key {asset_type_key}:{unique_property_key}:{value}.' } as const

export const relationshipCreateBody = {
  type: 'object',
  required: ['relationship_type_key', 'source_asset_id', 'target_asset_id'],
  additionalProperties: false,
  properties: {
    relationship_type_key: { type: 'string', minLength: 1, description: 'A relationship type of the metamodel.' },
    source_asset_id: assetRef,
    target_asset_id: assetRef,
  },
} as const

export const relationshipIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', description: 'Relationship UUID.' } },
} as const

const includeParam = {
  type: 'string',
  description: 'Comma-separated: source_asset, target_asset, each optionally with .properties (e.g. `source_asset,target_asset.properties`).',
} as const

export const relationshipGetQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { include: includeParam },
} as const

export const relationshipListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...pageQuerySchema(),
    sort: { type: 'string', description: 'Comma-separated fields (id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at), `-` for descending.' },
    include: includeParam,
  },
  patternProperties: {
    '^filter\\[[^\\]]+\\]$': {
      type: 'string',
      description: 'Equality filter: filter[relationship_type_key], filter[source_asset_id], filter[target_asset_id] (UUID or composite key).',
    },
  },
} as const

export const relationshipResponses = {
  one: recordEnvelope(relationshipSchema),
  list: listEnvelope(relationshipSchema),
  errors: commonErrorResponses,
  notFound: { ...errorEnvelopeSchema, description: 'Unknown relationship, or an end archived or not visible (not_found)' },
  conflict: { ...errorEnvelopeSchema, description: 'The same (type, source, target) exists (duplicate_relationship)' },
  invalid: { ...errorEnvelopeSchema, description: 'Unknown relationship type, unknown or invisible end, end type not allowed (validation_failed)' },
}
