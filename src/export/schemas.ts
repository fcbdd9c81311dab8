import { commonErrorResponses } from '../core/schemas.js'

export const exportQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    format: { type: 'string', enum: ['ndjson', 'csv'], default: 'ndjson', description: '`ndjson` (one record a line) or `csv` (needs `filter[asset_type_key]`).' },
  },
  patternProperties: {
    '^filter\\[[^\\]]+\\]$': { type: 'string', description: 'Equality filter as on GET /assets: filter[asset_type_key], filter[properties.<key>], …' },
  },
} as const

export const exportResponses = {
  200: {
    description: 'Every matching visible asset, streamed (no pages). NDJSON: one record as GET /assets/{id} returns it a line. '
      + 'CSV (RFC 4180): header `id,name,access_domain_key,created_at,updated_at,<property keys in metamodel order>`; '
      + 'a multi-select is its options joined by `|`; an unset value is an empty cell.',
    content: {
      'application/x-ndjson': { schema: { type: 'string' } },
      'text/csv': { schema: { type: 'string' } },
    },
  },
  ...commonErrorResponses,
}
