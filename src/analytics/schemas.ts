import { INTERVALS, MAX_GROUP_BY, MAX_MEASURES } from './spec.js'
import { filterSchema } from '../query/filter-schema.js'

/**
 * The analytics body and answer as the OpenAPI document shows them (CONTRACT §7). The route
 * validates by hand (analytics/spec.ts): these schemas describe, they do not reject.
 */

const fieldDescription = 'id, asset_type_key, access_domain_key, name, created_at, updated_at (with an interval), properties.<key>'

const dimensionSchema = {
  oneOf: [
    { type: 'string', description: `${fieldDescription}, or related_asset_type_key (any relationship type, outgoing)` },
    {
      type: 'object',
      required: ['field'],
      additionalProperties: false,
      properties: {
        field: { type: 'string', description: `${fieldDescription}, or related_asset_type_key` },
        interval: { type: 'string', enum: [...INTERVALS], description: 'For created_at, updated_at (required) and date properties.' },
        relationship_type_key: { type: 'string', description: 'With related_asset_type_key: the relationship type (default: any).' },
        direction: { type: 'string', enum: ['outgoing', 'incoming'], description: 'With related_asset_type_key (default outgoing).' },
        as: { type: 'string', minLength: 1, description: 'The key of this grouping in `group` (default: the field).' },
      },
    },
  ],
} as const

export const analyticsBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    filter: { oneOf: filterSchema.oneOf, description: 'A filter as in POST /search/assets; null or {}: no filter.' },
    measures: {
      type: ['array', 'null'],
      minItems: 1,
      maxItems: MAX_MEASURES,
      description: `Up to ${MAX_MEASURES}; default (or null) [{"type": "count"}].`,
      items: {
        type: 'object',
        required: ['type'],
        additionalProperties: false,
        properties: {
          type: { type: 'string', enum: ['count', 'count_distinct', 'sum', 'average'] },
          field: { type: 'string', description: 'count_distinct: any field; sum and average: a number or integer property (not currency, percentage or score: 400).' },
          as: { type: 'string', minLength: 1, description: 'The measure\'s name (default `count` or `<type>:<field>`).' },
        },
      },
    },
    group_by: { type: ['array', 'null'], items: dimensionSchema, maxItems: MAX_GROUP_BY, description: `Up to ${MAX_GROUP_BY} groupings; none (or null): one row.` },
    breakdown_by: { oneOf: [...dimensionSchema.oneOf, { type: 'null' }], description: 'A second grouping inside each row; none or null: no breakdown.' },
  },
  examples: [{
    measures: [{ type: 'count' }, { type: 'average', field: 'properties.memory_gb', as: 'avg_memory' }],
    group_by: ['properties.environment'],
    breakdown_by: 'properties.tier',
  }],
} as const

const groupValue = { type: ['string', 'number', 'boolean', 'null'] } as const
const measuresSchema = { type: 'object', additionalProperties: { type: 'number' } } as const

export const analyticsResponse = {
  type: 'object',
  required: ['data', 'meta'],
  properties: {
    data: {
      type: 'array',
      items: {
        type: 'object',
        required: ['group', 'measures'],
        properties: {
          group: { type: 'object', additionalProperties: groupValue, description: 'One entry per group_by field; {} without group_by.' },
          measures: measuresSchema,
          breakdown: {
            type: 'array',
            items: { type: 'object', required: ['value', 'measures'], properties: { value: groupValue, measures: measuresSchema } },
          },
        },
      },
    },
    meta: { type: 'object', required: ['total_groups'], properties: { total_groups: { type: 'integer' } } },
  },
} as const
