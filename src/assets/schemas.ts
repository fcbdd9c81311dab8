import { ASSET_NAME_SCHEMA, KEY_SCHEMA, commonErrorResponses, errorEnvelopeSchema, listEnvelope, pageMetaSchema, recordEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'
import { assetSummarySchema } from '../relationships/schemas.js'

const relatedAssetSchema = assetSummarySchema('The related asset, with `properties` only for include=…related_asset.properties.')

export const includedRelationshipSchema = {
  type: 'object',
  required: ['id', 'relationship_type_key', 'direction', 'related_asset_id'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    relationship_type_key: { type: 'string' },
    direction: { type: 'string', enum: ['outgoing', 'incoming'] },
    related_asset_id: { type: 'string', format: 'uuid' },
    related_asset: relatedAssetSchema,
  },
} as const

export const assetSchema = {
  type: 'object',
  required: ['id', 'asset_type_key', 'name', 'access_domain_key', 'properties', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'string', format: 'uuid', description: 'Service ID (UUIDv7).' },
    asset_type_key: { type: 'string' },
    name: { type: 'string' },
    access_domain_key: { type: ['string', 'null'] },
    properties: { type: 'object', additionalProperties: true, description: 'Values of the properties the asset type defines.' },
    created_at: { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] },
    updated_at: { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] },
    relationships: { type: 'array', items: includedRelationshipSchema, description: 'Only with include=relationships.' },
    relationships_meta: {
      ...pageMetaSchema,
      description: 'Paging of the included relationships, counted exactly per asset (total_items_exact is always true).',
    },
  },
} as const

const relatedAssetsGroup = {
  type: 'object',
  required: ['related_assets'],
  additionalProperties: false,
  properties: {
    related_assets: {
      type: 'array',
      maxItems: 10000,
      description: 'Replaces the whole set of this (direction, type) pair; [] removes every relationship of it.',
      items: {
        type: 'object',
        required: ['id'],
        additionalProperties: false,
        properties: { id: { type: 'string', minLength: 1, description: 'UUID or composite key type:unique_property:value.' } },
      },
    },
  },
} as const

const byType = { type: 'object', propertyNames: KEY_SCHEMA, additionalProperties: relatedAssetsGroup } as const

export const embeddedRelationshipsSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Embedded relationships, grouped by direction then relationship type. Pairs not sent are untouched.',
  properties: { outgoing: byType, incoming: byType },
} as const

export const assetCreateBody = {
  type: 'object',
  required: ['asset_type_key', 'name'],
  additionalProperties: false,
  properties: {
    asset_type_key: { type: 'string', minLength: 1 },
    name: ASSET_NAME_SCHEMA,
    access_domain_key: { type: ['string', 'null'] },
    properties: { type: 'object', additionalProperties: true },
    relationships: embeddedRelationshipsSchema,
  },
} as const

export const assetPatchBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    asset_type_key: { type: 'string', description: 'Cannot change; a different value is refused with 422.' },
    name: ASSET_NAME_SCHEMA,
    access_domain_key: { type: ['string', 'null'] },
    properties: { type: 'object', additionalProperties: true, description: 'Merged key by key; null clears a key.' },
    relationships: embeddedRelationshipsSchema,
  },
} as const

export const assetIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', description: 'UUID or composite key {asset_type_key}:{unique_property_key}:{value}.' } },
} as const

/** PUT (upsert): the asset is named by its natural key, which also says what to create. */
export const assetKeyParams = {
  type: 'object',
  required: ['id'],
  properties: {
    id: {
      type: 'string',
      description: 'Composite key {asset_type_key}:{unique_property_key}:{value}, e.g. server:hostname:web-01. ' +
        'A UUID names no asset here (404: to change an asset by its id, PATCH /assets/{id}).',
    },
  },
} as const

export const includeQuerySchema = {
  include: {
    type: 'string',
    description: 'relationships | relationships,relationships.related_asset | relationships,relationships.related_asset.properties',
  },
  ...pageQuerySchema('relationships_page'),
  relationships_sort: { type: 'string', description: 'created_at | relationship_type_key | related_asset.name, `-` for descending.' },
} as const

const relationshipsFilterPattern = {
  '^relationships_filter\\[(relationship_type_key|related_asset\\.asset_type_key|related_asset\\.name)\\]$': { type: 'string' },
  '^relationships_filter\\[direction\\]$': { type: 'string', enum: ['outgoing', 'incoming'] },
} as const

export const assetGetQuery = {
  type: 'object',
  additionalProperties: false,
  properties: includeQuerySchema,
  patternProperties: relationshipsFilterPattern,
} as const

export const assetListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...pageQuerySchema(),
    sort: { type: 'string', description: 'Comma-separated fields, `-` for descending, e.g. `name,-created_at`.' },
    ...includeQuerySchema,
  },
  patternProperties: {
    '^filter\\[[^\\]]+\\]$': { type: 'string', description: 'Equality filter: filter[asset_type_key], filter[properties.<key>], …; filter[access_domain_key]= (empty) lists the assets without an access domain.' },
    ...relationshipsFilterPattern,
  },
} as const

export const assetResponses = {
  one: recordEnvelope(assetSchema),
  list: listEnvelope(assetSchema),
  errors: commonErrorResponses,
  notFound: { ...errorEnvelopeSchema, description: 'Unknown, archived or not visible (not_found)' },
  conflict: { ...errorEnvelopeSchema, description: 'Unique property value taken (unique_violation)' },
  invalid: { ...errorEnvelopeSchema, description: 'Property or type errors (validation_failed)' },
}

/** Body of PUT /assets/{composite key}: as POST /assets; asset_type_key may be left out (the key names the type). */
export const assetPutBody = {
  ...assetCreateBody,
  required: ['name'],
  properties: {
    ...assetCreateBody.properties,
    asset_type_key: { type: 'string', minLength: 1, description: 'Optional; must be the type of the composite key (422 otherwise).' },
  },
} as const
