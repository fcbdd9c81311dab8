import { commonErrorResponses, errorEnvelopeSchema, listEnvelope, recordEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'
import { PROPERTY_TYPES } from './types.js'

const nullableString = { type: ['string', 'null'] } as const

export const propertyDefinitionSchema = {
  type: 'object',
  required: ['key', 'asset_type_key', 'name', 'description', 'type', 'required', 'options', 'currency', 'min', 'max'],
  properties: {
    key: { type: 'string' },
    asset_type_key: { type: 'string' },
    name: { type: 'string' },
    description: nullableString,
    type: { type: 'string', enum: [...PROPERTY_TYPES] },
    required: { type: 'boolean' },
    options: { type: ['array', 'null'], items: { type: 'string' } },
    currency: nullableString,
    min: { type: ['number', 'null'] },
    max: { type: ['number', 'null'] },
  },
} as const

export const assetTypeSchema = {
  type: 'object',
  required: ['key', 'name', 'description', 'unique_property_key', 'properties'],
  properties: {
    key: { type: 'string' },
    name: { type: 'string' },
    description: nullableString,
    unique_property_key: nullableString,
    properties: { type: 'array', items: propertyDefinitionSchema },
  },
} as const

export const relationshipTypeSchema = {
  type: 'object',
  required: ['key', 'name', 'description', 'source_asset_type_keys', 'target_asset_type_keys'],
  properties: {
    key: { type: 'string' },
    name: { type: 'string' },
    description: nullableString,
    source_asset_type_keys: { type: 'array', items: { type: 'string' }, description: 'Empty = any asset type.' },
    target_asset_type_keys: { type: 'array', items: { type: 'string' }, description: 'Empty = any asset type.' },
  },
} as const

export const listQuery = { type: 'object', additionalProperties: false, properties: pageQuerySchema() } as const
export const propertyListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { ...pageQuerySchema(), 'filter[asset_type_key]': { type: 'string' } },
} as const
/** Any text: a key that cannot exist (`BAD`, `a b`) is unknown, 404 like any other (CONTRACT §1). */
export const keyParams = { type: 'object', required: ['key'], properties: { key: { type: 'string', description: 'The key (lower-case letters, digits and _)' } } } as const

const notFound = { ...errorEnvelopeSchema, description: 'Unknown key (not_found)' }

export const metamodelResponses = {
  assetTypes: { 200: listEnvelope(assetTypeSchema), ...commonErrorResponses },
  assetType: { 200: recordEnvelope(assetTypeSchema), 404: notFound, ...commonErrorResponses },
  properties: { 200: listEnvelope(propertyDefinitionSchema), ...commonErrorResponses },
  relationshipTypes: { 200: listEnvelope(relationshipTypeSchema), ...commonErrorResponses },
  relationshipType: { 200: recordEnvelope(relationshipTypeSchema), 404: notFound, ...commonErrorResponses },
}
