import type { FastifyInstance } from 'fastify'
import { commonErrorResponses, errorEnvelopeSchema, listEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'
import { assetSchema } from '../assets/schemas.js'
import { relationshipSchema } from '../relationships/schemas.js'
import { apiKeySchema } from '../admin/schemas.js'
import { EVENT_TYPES } from '../outbox/cloud-event.js'
import { DEFAULT_FEED_SIZE, MAX_FEED_SIZE } from './service.js'

const { relationships: _r, relationships_meta: _m, ...assetFields } = assetSchema.properties
const { source_asset: _s, target_asset: _t, ...relationshipFields } = relationshipSchema.properties
const assetObject = { ...assetSchema, properties: assetFields, description: 'The asset as GET /assets/{id} returns it, without includes.' }
const relationshipObject = { ...relationshipSchema, properties: relationshipFields, description: 'The relationship as GET /relationships/{id} returns it.' }
const apiKeyObject = { ...apiKeySchema, description: 'The API key record (never its secret).' }

const changesSchema = {
  type: 'object',
  description: 'Exactly the fields that changed (`name`, `access_domain_key`, `properties.<key>`; for keys their record fields), each {from, to}; never `updated_at`. '
    + 'A move of an asset out of an access domain the reader could not see into one it can comes with `to` alone: the values before the move belong to the hidden domain.',
  additionalProperties: { type: 'object', required: ['to'], properties: { from: {}, to: {} } },
  examples: [{ name: { from: 'web-1', to: 'web-01' }, 'properties.environment': { from: 'dev', to: 'prod' } }],
} as const

const actorSchema = {
  type: 'object',
  required: ['api_key_id', 'user_id'],
  properties: {
    api_key_id: { type: ['string', 'null'], format: 'uuid', description: 'The API key that made the change; null for the operator (CLI).' },
    user_id: { type: ['string', 'null'], format: 'uuid', description: "The key's owner; null for the operator (CLI)." },
  },
} as const

/** The CloudEvents attributes shared by every event (CONTRACT §13). */
function envelope(type: string | null, data: object, description: string): Record<string, unknown> {
  return {
    type: 'object',
    description,
    required: ['specversion', 'id', 'type', 'source', 'subject', 'time', 'datacontenttype', 'sequence', 'requestid', 'data'],
    properties: {
      specversion: { type: 'string', enum: ['1.0'] },
      id: { type: 'string', format: 'uuid', description: 'Event id (UUIDv7); the same in the feed, in webhooks (webhook-id) and on NATS (Nats-Msg-Id).' },
      type: type === null ? { type: 'string', enum: [...EVENT_TYPES] } : { type: 'string', enum: [type] },
      source: { type: 'string', examples: ['/organizations/acme'], description: '/organizations/<organization key>' },
      subject: { type: 'string', examples: ['assets/0190d3c4-8c6e-7d3e-9d0a-0c1d2e3f4a5b'], description: 'assets/<id>, relationships/<id> or api-keys/<id>' },
      time: { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] },
      datacontenttype: { type: 'string', enum: ['application/json'] },
      sequence: { type: 'string', pattern: '^[0-9]+$', description: 'Position in the organization\'s feed: strictly increasing in commit order (compare as integers).' },
      requestid: { type: ['string', 'null'], description: 'X-Request-Id of the request that made the change; null for the operator (CLI).' },
      idempotencykey: { type: 'string', description: 'The Idempotency-Key of that request, when it had one.' },
      data,
    },
  }
}

function dataOf(object: object, withChanges: boolean): object {
  return {
    type: 'object',
    required: withChanges ? ['object', 'changes', 'actor'] : ['object', 'actor'],
    properties: { object, ...(withChanges ? { changes: changesSchema } : {}), actor: actorSchema },
  }
}

const PER_TYPE: Record<string, [object, boolean, string]> = {
  'asset.created': [assetObject, false, 'An asset was created (POST, bulk, upsert).'],
  'asset.updated': [assetObject, true, 'An asset changed (PATCH, bulk, upsert); `changes` lists what changed.'],
  'asset.archived': [assetObject, false, 'An asset was archived (DELETE /assets/{id}); `object` is its last state.'],
  'asset.restored': [assetObject, false, 'An archived asset was restored (console).'],
  'asset.deleted': [assetObject, false, 'An archived asset was deleted for good (console); `object` is its last state.'],
  'relationship.created': [relationshipObject, false, 'A relationship was created (POST, bulk, embedded relationships).'],
  'relationship.deleted': [relationshipObject, false, 'A relationship was deleted (DELETE, embedded sync, permanent deletion of an end).'],
  'api_key.created': [apiKeyObject, false, 'An API key was created (never with its secret).'],
  'api_key.updated': [apiKeyObject, true, 'An API key changed (incl. transfer to another owner).'],
  'api_key.deleted': [apiKeyObject, false, 'An API key was deleted; `object` is its last state.'],
}

/** `asset.created` → `AssetCreatedEvent`: the component name of each event type's schema. */
export function eventSchemaName(type: string): string {
  return `${type.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}Event`
}

/** One schema per event type, in the OpenAPI document's components (added at the root, see app.ts). */
export function registerEventSchemas(app: FastifyInstance): void {
  for (const type of EVENT_TYPES) {
    const [object, changes, description] = PER_TYPE[type]!
    app.addSchema({ $id: eventSchemaName(type), title: eventSchemaName(type), ...envelope(type, dataOf(object, changes), description) })
  }
}

/** Any event, as the feed and history serialize it (each type: components `…Event`). */
export const cloudEventSchema = envelope(null, {
  type: 'object',
  required: ['object', 'actor'],
  properties: { object: { type: 'object', additionalProperties: true }, changes: changesSchema, actor: actorSchema },
}, `A CloudEvents 1.0 event. Its type's own schema is in components: ${EVENT_TYPES.map(eventSchemaName).join(', ')}.`)

export const feedQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { type: 'string', maxLength: 100, description: 'The `meta.next_cursor` of the previous page; without it, from the oldest event kept.' },
    'filter[type]': { type: 'string', maxLength: 1000, description: 'Comma-separated event types, e.g. `asset.created,asset.updated`; a type that does not exist, or an empty list or entry, is 400 `invalid_filter`.' },
    'filter[subject]': { type: 'string', maxLength: 200, description: 'One subject: `assets/<id>`, `relationships/<id>` or `api-keys/<id>`, the id a UUID; an asset also by its composite key (`assets/server:hostname:web-01`: the live asset it names now). 400 `invalid_filter` otherwise, also for a composite key of an unknown type or of a property that is not the type\'s unique key.' },
    'page[size]': { type: 'integer', minimum: 1, maximum: MAX_FEED_SIZE, description: `Events per page, 1..${MAX_FEED_SIZE} (default ${DEFAULT_FEED_SIZE}).` },
  },
} as const

export const feedResponse = {
  type: 'object',
  required: ['data', 'meta'],
  properties: {
    data: { type: 'array', items: cloudEventSchema },
    meta: {
      type: 'object',
      required: ['next_cursor', 'has_more'],
      properties: {
        next_cursor: { type: 'string', description: 'Opaque; pass it as `after` to read on. The same cursor when nothing followed it (poll with it).' },
        has_more: { type: 'boolean', description: 'true when more events follow at once.' },
      },
    },
  },
} as const

export const historyQuery = { type: 'object', additionalProperties: false, properties: pageQuerySchema() } as const

export const historyResponse = listEnvelope(cloudEventSchema)

export const eventErrors = {
  ...commonErrorResponses,
  410: { ...errorEnvelopeSchema, description: 'The cursor is older than the retention (cursor_expired); start again without `after`.' },
} as const

export const historyErrors = {
  ...commonErrorResponses,
  404: { ...errorEnvelopeSchema, description: 'Unknown, archived or not visible asset (not_found).' },
} as const
