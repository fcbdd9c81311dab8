import { MAX_INDEXED_TEXT } from '../core/schemas.js'
import { DATE_PATTERN, UNIQUE_KEY_PATTERN, URI_PATTERN, boundsText } from '../metamodel/validate.js'
import { Params } from '../store/sql.js'
import type { PropertySpec } from './types.js'

/**
 * SQL deciding whether a stored property value fits a property definition: the same rules as the
 * API's value validation (metamodel/validate.ts), evaluated where the data is instead of loading
 * every asset. Every cast sits behind a CASE that has checked the JSON type first, so a value of
 * another type yields false rather than a cast error. Values enter only as parameters.
 *
 * The unique key, date and URL patterns are the API's own: written to mean the same to JavaScript
 * and to PostgreSQL (no `\s`, `\d` or `[:space:]`, whose meaning in SQL follows the server's locale),
 * they cannot drift apart.
 */

function string(v: string): string {
  return `jsonb_typeof(${v}) = 'string'`
}

function numeric(v: string, p: PropertySpec, params: Params, integer: boolean): string {
  const n = `(${v})::numeric`
  const tests = [integer ? `${n} = trunc(${n})` : 'true']
  const min = p.type === 'percentage' ? 0 : p.min
  const max = p.type === 'percentage' ? 100 : p.max
  if (min !== null) tests.push(`${n} >= ${params.add(min)}::numeric`)
  if (max !== null) tests.push(`${n} <= ${params.add(max)}::numeric`)
  return `CASE WHEN jsonb_typeof(${v}) = 'number' THEN ${tests.join(' AND ')} ELSE false END`
}

/** YYYY-MM-DD naming a real day (2024-02-29 yes, 2026-02-30 and 0000-01-01 no), without a cast that could fail. */
function date(v: string, params: Params): string {
  const s = `(${v} #>> '{}')`
  const y = `substr(${s}, 1, 4)::int`
  const m = `substr(${s}, 6, 2)::int`
  const d = `substr(${s}, 9, 2)::int`
  const leap = `((${y} % 4 = 0 AND ${y} % 100 <> 0) OR ${y} % 400 = 0)`
  const days = `CASE WHEN ${m} = 2 THEN CASE WHEN ${leap} THEN 29 ELSE 28 END WHEN ${m} IN (4, 6, 9, 11) THEN 30 ELSE 31 END`
  return `CASE WHEN ${string(v)} AND ${s} ~ ${params.add(DATE_PATTERN)}
    THEN ${m} BETWEEN 1 AND 12 AND ${d} BETWEEN 1 AND ${days} ELSE false END`
}

function multiSelect(v: string, options: string, params: Params): string {
  return `CASE WHEN jsonb_typeof(${v}) = 'array' THEN
      NOT EXISTS (SELECT 1 FROM jsonb_array_elements(${v}) e
                  WHERE jsonb_typeof(e) <> 'string' OR NOT (e #>> '{}') = ANY(${options}::text[]))
      AND (SELECT count(*) = count(DISTINCT e) FROM jsonb_array_elements(${v}) e)
    ELSE false END`
}

/** A boolean SQL expression: the jsonb value `v` (not JSON null) is valid for `p`. */
export function fitsSql(v: string, p: PropertySpec, params: Params): string {
  switch (p.type) {
    case 'text': case 'long_text': case 'rich_text':
      return string(v)
    case 'url':
      return `(${string(v)} AND (${v} #>> '{}') ~ ${params.add(URI_PATTERN)})`
    case 'unique_key':
      // length() counts characters, as Ajv's maxLength does (an emoji is one, not two).
      return `(${string(v)} AND length(${v} #>> '{}') <= ${params.add(MAX_INDEXED_TEXT)}::int
        AND (${v} #>> '{}') ~ ${params.add(UNIQUE_KEY_PATTERN)})`
    case 'number': case 'currency': case 'percentage':
      return numeric(v, p, params, false)
    case 'integer': case 'score':
      return numeric(v, p, params, true)
    case 'date':
      return date(v, params)
    case 'boolean':
      return `jsonb_typeof(${v}) = 'boolean'`
    case 'select':
      return `(${string(v)} AND (${v} #>> '{}') = ANY(${params.add(p.options ?? [])}::text[]))`
    case 'multi_select':
      return multiSelect(v, params.add(p.options ?? []), params)
  }
}

/** What a valid value of `p` is, for refusal messages. */
export function expectation(p: PropertySpec): string {
  switch (p.type) {
    case 'text': case 'long_text': case 'rich_text': return 'a string'
    case 'url': return 'a URL'
    case 'unique_key': return `a unique key (non-empty, at most ${MAX_INDEXED_TEXT} characters, without white space or any of : / ? # [ ] @ ! $ & ' ( ) * + , ; = \\)`
    case 'number': case 'currency': return `a number${boundsText(p.min, p.max)}`
    case 'integer': case 'score': return `an integer${boundsText(p.min, p.max)}`
    case 'percentage': return 'a number from 0 to 100'
    case 'date': return 'a date YYYY-MM-DD'
    case 'boolean': return 'true or false'
    case 'select': return `one of ${(p.options ?? []).join(', ')}`
    case 'multi_select': return `a list of distinct values from ${(p.options ?? []).join(', ')}`
  }
}
