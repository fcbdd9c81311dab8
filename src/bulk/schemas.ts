import { assetCreateBody, assetPutBody, embeddedRelationshipsSchema } from '../assets/schemas.js'
import { ASSET_NAME_SCHEMA, KEY_SCHEMA, errorEnvelopeSchema } from '../core/schemas.js'
import { MAX_BULK_ITEMS } from '../core/items.js'

const clientRef = {
  type: ['string', 'null'],
  maxLength: 1000,
  description: 'Any text of yours, echoed beside the id in the answer and in the errors of this item (meta.client_ref); null, as answers show an item without one, is none.',
} as const

/** An array of up to 10,000 items; a longer one is refused with too_many_items before validation. */
function bulkBody(item: object, description: string): object {
  return { type: 'array', maxItems: MAX_BULK_ITEMS, description, items: item }
}

export const bulkCreateAssetsBody = bulkBody(
  { ...assetCreateBody, properties: { ...assetCreateBody.properties, client_ref: clientRef } },
  'Assets to create, as POST /assets plus client_ref. All or nothing.',
)

export const bulkPatchAssetsBody = bulkBody(
  {
    type: 'object',
    required: ['id'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', minLength: 1, description: 'UUID or composite key type:unique_property:value.' },
      client_ref: clientRef,
      asset_type_key: { type: 'string', description: 'Cannot change; a different value is refused with 422 (as on PATCH /assets/{id}).' },
      name: ASSET_NAME_SCHEMA,
      access_domain_key: { type: ['string', 'null'] },
      properties: { type: 'object', additionalProperties: true, description: 'Merged key by key; null clears a key.' },
      relationships: embeddedRelationshipsSchema,
    },
  },
  'Changes to existing assets, applied in order. All or nothing.',
)

export const bulkUpsertAssetsBody = bulkBody(
  {
    type: 'object',
    required: ['id', 'name'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', minLength: 1, description: 'Composite key type:unique_property:value naming the asset to create or replace.' },
      client_ref: clientRef,
      ...assetPutBody.properties,
    },
  },
  'Assets to create or replace by composite key (upsert). All or nothing.',
)

/** PUT /bulk/assets: what became of each item, in request order. */
export const bulkUpsertEnvelope = {
  type: 'object',
  required: ['data'],
  description: 'One entry per item, in request order: created, updated, or unchanged (not written).',
  properties: {
    data: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'client_ref', 'result'],
        properties: {
          id: { type: 'string', format: 'uuid' },
          client_ref: { type: ['string', 'null'] },
          result: { type: 'string', enum: ['created', 'updated', 'unchanged'] },
        },
      },
    },
  },
} as const

export const bulkCreateRelationshipsBody = bulkBody(
  {
    type: 'object',
    required: ['relationship_type_key', 'source_asset_id', 'target_asset_id'],
    additionalProperties: false,
    properties: {
      relationship_type_key: KEY_SCHEMA,
      source_asset_id: { type: 'string', minLength: 1, description: 'UUID or composite key.' },
      target_asset_id: { type: 'string', minLength: 1, description: 'UUID or composite key.' },
      client_ref: clientRef,
    },
  },
  'Relationships to create. All or nothing.',
)

export const bulkEnvelope = {
  type: 'object',
  required: ['data'],
  description: 'One entry per item, in request order.',
  properties: {
    data: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'client_ref'],
        properties: { id: { type: 'string', format: 'uuid' }, client_ref: { type: ['string', 'null'] } },
      },
    },
  },
} as const

export const bulkErrorResponses = {
  409: { ...errorEnvelopeSchema, description: 'Unique value given twice or already taken (unique_violation), or relationship exists (duplicate_relationship); every clashing item listed' },
  413: { ...errorEnvelopeSchema, description: 'Body over the bulk byte limit (payload_too_large)' },
  422: { ...errorEnvelopeSchema, description: 'Invalid or unknown items (validation_failed), every one listed with meta.index and meta.client_ref; more than 10,000 items (too_many_items)' },
}
