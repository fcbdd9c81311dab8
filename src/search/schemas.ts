import { commonErrorResponses, listEnvelope } from '../core/schemas.js'
import { Errors } from '../core/errors.js'
import type { BodyErrorCodes } from '../core/http-errors.js'
import { MAX_PAGE_NUMBER, MAX_PAGE_SIZE } from '../core/pagination.js'
import { assetSchema } from '../assets/schemas.js'
import { relationshipSchema } from '../relationships/schemas.js'
import { filterSchema } from '../query/filter-schema.js'
import { parseFilter } from '../query/parse.js'

/**
 * Search bodies (CONTRACT §4), as the routes validate them and the OpenAPI document shows them:
 * one schema, compiled once by the route's Ajv. A failure gets the code of the member it is in
 * (SEARCH_BODY_CODES, applied by the one error handler, core/http-errors.ts) and a pointer into
 * the body. Only the filter tree is read by hand (query/parse.ts), since its fields and
 * operators depend on the organization's metamodel.
 */

/** Which code a schema failure under each member gets (the longest matching prefix); invalid_request elsewhere. */
export const SEARCH_BODY_CODES: BodyErrorCodes = [
  ['/filter', Errors.INVALID_FILTER, (body) => parseFilter((body as { filter?: unknown }).filter, '/filter')],
  ['/sort', Errors.INVALID_SORT],
  ['/page', Errors.INVALID_PAGE],
  ['/include', Errors.INVALID_INCLUDE],
  ['/relationships/filter', Errors.INVALID_FILTER],
  ['/relationships/sort', Errors.INVALID_SORT],
  ['/relationships/page', Errors.INVALID_PAGE],
]

/** Sort keys of a search: more is surely a mistake (and its schema check a cost in each of them). */
export const MAX_SORT_KEYS = 20
/** Entries of a search's `include`, repeated ones counted. */
export const MAX_INCLUDES = 10

const sortSchema = {
  type: ['array', 'null'],
  maxItems: MAX_SORT_KEYS,
  description: `Sort keys in order, at most ${MAX_SORT_KEYS}; \`id\` always breaks ties. Default: created_at, id.`,
  items: {
    type: 'object',
    required: ['field'],
    additionalProperties: false,
    properties: { field: { type: 'string', minLength: 1 }, order: { type: 'string', enum: ['asc', 'desc'], description: 'Default asc.' } },
  },
} as const

const pageSchema = {
  type: ['object', 'null'],
  additionalProperties: false,
  properties: {
    number: { type: 'integer', minimum: 1, maximum: MAX_PAGE_NUMBER, description: 'From 1 (default 1).' },
    size: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, description: `1..${MAX_PAGE_SIZE} (default 50).` },
  },
} as const

/** The page of a search, which also takes the count mode (CONTRACT §1). */
const searchPageSchema = {
  ...pageSchema,
  properties: {
    ...pageSchema.properties,
    count: {
      type: 'string',
      enum: ['exact'],
      description: '"exact": count every match. Without it total_items is exact up to 10,000 matches; beyond, it is 10,000 and total_items_exact is false.',
    },
  },
} as const

export const searchAssetsBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    filter: filterSchema,
    sort: sortSchema,
    page: searchPageSchema,
    include: {
      type: ['array', 'null'],
      maxItems: MAX_INCLUDES,
      items: { type: 'string', enum: ['relationships', 'relationships.related_asset', 'relationships.related_asset.properties'] },
    },
    relationships: {
      type: ['object', 'null'],
      additionalProperties: false,
      description: 'Page, filter and sort of the included relationships. filter: a search filter (conditions in nested and/or groups) on '
        + 'relationship_type_key, direction and related_asset.asset_type_key (equals, not_equals, in, not_in) and related_asset.name '
        + '(those and contains, not_contains, starts_with), or {"<field>": value or [values]}; sort: created_at, relationship_type_key, related_asset.name.',
      properties: { page: pageSchema, filter: { type: ['object', 'null'], additionalProperties: true }, sort: sortSchema },
    },
  },
} as const

export const searchRelationshipsBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    filter: {
      ...filterSchema,
      description: 'As in POST /search/assets, over the fields id, relationship_type_key, source_asset_id, target_asset_id, created_at, '
        + 'source_asset.<asset field> and target_asset.<asset field>.',
      examples: [{ and: [
        { field: 'relationship_type_key', operator: 'equals', value: 'runs_on' },
        { field: 'target_asset.properties.environment', operator: 'equals', value: 'prod' },
      ] }],
    },
    sort: sortSchema,
    page: searchPageSchema,
    include: { type: ['array', 'null'], maxItems: MAX_INCLUDES, items: { type: 'string', enum: ['source_asset', 'source_asset.properties', 'target_asset', 'target_asset.properties'] } },
  },
} as const

export const searchResponses = {
  assets: listEnvelope(assetSchema, false),
  relationships: listEnvelope(relationshipSchema, false),
  errors: commonErrorResponses,
}
