/**
 * Shared JSON Schemas of the envelopes (CONTRACT §1). Routes reference them in their `response`
 * members; the OpenAPI document is generated from the same objects.
 */
export const errorEnvelopeSchema = {
  type: 'object',
  description: 'Error envelope: one entry per problem (a bulk request lists every failing item).',
  required: ['errors'],
  properties: {
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['status', 'code', 'detail'],
        properties: {
          status: { type: 'string', examples: ['422'] },
          code: { type: 'string', examples: ['validation_failed'] },
          detail: { type: 'string' },
          source: {
            type: 'object',
            properties: { pointer: { type: 'string' }, parameter: { type: 'string' } },
          },
          meta: { type: 'object', additionalProperties: true },
        },
      },
    },
  },
} as const

export const pageMetaSchema = {
  type: 'object',
  required: ['page'],
  properties: {
    page: {
      type: 'object',
      required: ['number', 'size', 'total_items', 'total_items_exact', 'total_pages'],
      properties: {
        number: { type: 'integer' },
        size: { type: 'integer' },
        total_items: { type: 'integer', description: 'Exact up to 10,000 matches; beyond, 10,000 unless the exact count was asked for (page[count]=exact).' },
        total_items_exact: { type: 'boolean', description: 'false when total_items is capped at 10,000 (more items match).' },
        total_pages: { type: 'integer' },
      },
    },
  },
} as const

const nullableUrl = { type: ['string', 'null'] } as const

export const linksSchema = {
  type: 'object',
  properties: { self: { type: 'string' }, first: { type: 'string' }, prev: nullableUrl, next: nullableUrl, last: { ...nullableUrl, description: 'null when total_items is capped (total_items_exact false)' } },
} as const

export function listEnvelope(item: object, withLinks = true): object {
  return {
    type: 'object',
    required: ['data', 'meta'],
    properties: { data: { type: 'array', items: item }, meta: pageMetaSchema, ...(withLinks ? { links: linksSchema } : {}) },
  }
}

export function recordEnvelope(item: object): object {
  return { type: 'object', required: ['data'], properties: { data: item } }
}

/** Error responses every authenticated route can give, for the OpenAPI document. */
export const commonErrorResponses = {
  400: { ...errorEnvelopeSchema, description: 'Malformed request (invalid_request, invalid_filter, invalid_sort, invalid_page, invalid_include)' },
  401: { ...errorEnvelopeSchema, description: 'Missing, unknown or inactive API key (unauthorized, api_key_inactive)' },
  403: { ...errorEnvelopeSchema, description: 'Not allowed (forbidden, ip_not_allowed, api_access_disabled)' },
  429: { ...errorEnvelopeSchema, description: 'Organization quota spent (rate_limit_exceeded); see Retry-After' },
  503: { ...errorEnvelopeSchema, description: "Shutting down, busy, the database out of reach or its disk full (service_unavailable, with Retry-After); a statement ran past the server's statement timeout (query_timeout)" },
} as const

/**
 * Longest asset name and `unique_key` value, in characters. Both are btree-indexed, and a btree
 * entry holds at most about 2,700 bytes: 500 characters are at most 2,000 bytes of UTF-8.
 */
export const MAX_INDEXED_TEXT = 500

/** An asset's name. */
export const ASSET_NAME_SCHEMA = { type: 'string', minLength: 1, maxLength: MAX_INDEXED_TEXT } as const

export const KEY_SCHEMA = { type: 'string', pattern: '^[a-z][a-z0-9_]{0,62}$' } as const

/** Route description of a read whose count or answer the server remembers (counts/cache.ts). */
export const REMEMBERED_RESULTS = 'The server remembers `total_items` of a filtered list or search, and an analytics answer, until the '
  + 'organization\'s assets or relationships change (at most 10 s); send `Cache-Control: no-cache` to compute them afresh.'
