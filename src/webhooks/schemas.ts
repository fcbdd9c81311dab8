import { commonErrorResponses, errorEnvelopeSchema, listEnvelope, recordEnvelope } from '../core/schemas.js'
import { pageQuerySchema } from '../core/pagination.js'
import { EVENT_TYPE_PATTERNS, WEBHOOK_LIMITS } from './patterns.js'

const timestamp = { type: 'string', format: 'date-time', examples: ['2026-01-31T09:15:00Z'] } as const
const nullableTimestamp = { type: ['string', 'null'], format: 'date-time' } as const

const urlField = {
  type: 'string', minLength: 1, maxLength: WEBHOOK_LIMITS.url,
  description: 'http or https. Loopback, private, link-local and unique-local addresses (literal, or what the host name resolves to) are refused unless the server runs with KBIS_WEBHOOK_ALLOW_PRIVATE=true.',
  examples: ['https://hooks.example.com/kbis'],
} as const
const eventTypesField = {
  type: 'array', minItems: 1, maxItems: WEBHOOK_LIMITS.eventTypes, uniqueItems: true,
  items: { type: 'string', examples: EVENT_TYPE_PATTERNS },
  description: `Event types or patterns: ${EVENT_TYPE_PATTERNS.join(', ')}.`,
} as const
const descriptionField = { type: ['string', 'null'], maxLength: WEBHOOK_LIMITS.description } as const

const webhookProperties = {
  id: { type: 'string', format: 'uuid' },
  url: { type: 'string' },
  description: { type: ['string', 'null'] },
  event_types: { type: 'array', items: { type: 'string' } },
  enabled: { type: 'boolean', description: 'false: nothing is sent. A receiver answering 410 Gone sets it to false.' },
  created_at: timestamp,
  updated_at: timestamp,
} as const

export const webhookSchema = { type: 'object', required: Object.keys(webhookProperties), properties: webhookProperties } as const

const webhookWithSecretSchema = {
  type: 'object',
  required: [...Object.keys(webhookProperties), 'secret'],
  properties: {
    ...webhookProperties,
    secret: {
      type: 'string',
      description: 'whsec_ + base64 of 32 random bytes, shown only in this response. Deliveries are signed with it (Standard Webhooks); after a rotation the previous secret signs too for 24 hours.',
    },
  },
} as const

export const deliverySchema = {
  type: 'object',
  required: ['id', 'event_id', 'event_type', 'status', 'attempts', 'last_attempt_at', 'last_status_code', 'last_error', 'next_attempt_at'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    event_id: { type: 'string', format: 'uuid', description: 'Sent as webhook-id, the same on every attempt.' },
    event_type: { type: 'string' },
    status: { type: 'string', enum: ['pending', 'succeeded', 'failed'] },
    attempts: { type: 'integer', description: 'Attempts made so far.' },
    last_attempt_at: nullableTimestamp,
    last_status_code: { type: ['integer', 'null'], description: 'HTTP status of the last answer; null when none came (refused, timeout).' },
    last_error: { type: ['string', 'null'], description: 'Why the last attempt failed; null after a success.' },
    next_attempt_at: { ...nullableTimestamp, description: 'When a pending delivery is (re)tried; null once succeeded or failed.' },
  },
} as const

export const webhookCreateBody = {
  type: 'object',
  required: ['url', 'event_types'],
  additionalProperties: false,
  properties: { url: urlField, description: descriptionField, event_types: eventTypesField, enabled: { type: 'boolean', default: true } },
} as const

export const webhookPatchBody = {
  type: 'object',
  additionalProperties: false,
  properties: { url: urlField, description: descriptionField, event_types: eventTypesField, enabled: { type: 'boolean' } },
} as const

export const listQuery = { type: 'object', additionalProperties: false, properties: pageQuerySchema() } as const
export const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const
export const deliveryParams = {
  type: 'object', required: ['id', 'delivery_id'], properties: { id: { type: 'string' }, delivery_id: { type: 'string' } },
} as const

const notFound = { ...errorEnvelopeSchema, description: 'Unknown webhook or delivery (not_found)' }
const invalid = { ...errorEnvelopeSchema, description: 'A refused URL or an unknown event type (validation_failed, with source.pointer)' }
const errors = {
  ...commonErrorResponses,
  403: { ...errorEnvelopeSchema, description: 'Webhooks are managed by Admin keys only (forbidden, ip_not_allowed, api_access_disabled)' },
}

export const webhookResponses = {
  list: { 200: listEnvelope(webhookSchema), ...errors },
  one: { 200: recordEnvelope(webhookSchema), 404: notFound, ...errors },
  created: { 201: recordEnvelope(webhookWithSecretSchema), 422: invalid, ...errors },
  patched: { 200: recordEnvelope(webhookSchema), 404: notFound, 422: invalid, ...errors },
  deleted: { 204: { type: 'null', description: 'Deleted with its delivery log; nothing more is sent' }, 404: notFound, ...errors },
  rotated: { 200: recordEnvelope(webhookWithSecretSchema), 404: notFound, ...errors },
  deliveries: { 200: listEnvelope(deliverySchema), 404: notFound, ...errors },
  queued: { 202: recordEnvelope(deliverySchema), 404: notFound, ...errors },
}
