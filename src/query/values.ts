import { isUuid } from '../core/time.js'
import { losesDigits } from '../core/json-values.js'
import type { FieldType } from './fields.js'

/**
 * Checks one filter value against a field type, from a JSON body (`fromJson`) or from a query
 * string (`fromString`). The result is the value to bind, normalized (UUIDs lower-cased,
 * timestamps as `toISOString()`), or a `Mismatch` saying what was expected.
 */

export type Scalar = string | number | boolean

export interface Mismatch {
  readonly mismatch: string
}

export type Checked = Scalar | Mismatch

export function isMismatch(value: Checked): value is Mismatch {
  return typeof value === 'object'
}

/** What a field of each type takes, for error details: `needs a date YYYY-MM-DD`. */
export const EXPECTED: Readonly<Record<FieldType, string>> = {
  text: 'a string',
  number: 'a number',
  date: 'a date YYYY-MM-DD',
  datetime: 'an ISO 8601 date or UTC timestamp, e.g. 2026-01-31 or 2026-01-31T09:15:00Z',
  boolean: 'true or false',
  multi: 'one option, a string',
  uuid: 'a UUID',
}

export function fromJson(type: FieldType, value: unknown): Checked {
  switch (type) {
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? value : mismatch(type, value)
    case 'boolean':
      return typeof value === 'boolean' ? value : mismatch(type, value)
    default:
      return typeof value === 'string' ? fromString(type, value) : mismatch(type, value)
  }
}

const NUMBER_TEXT = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/

/** Parses a query-string value by the field's type: `"16"` → 16, `"true"` → true. */
export function fromString(type: FieldType, text: string): Checked {
  switch (type) {
    case 'text': case 'multi':
      return text
    case 'number': {
      const n = NUMBER_TEXT.test(text) ? Number(text) : Number.NaN
      if (!Number.isFinite(n)) return mismatch(type, text)
      // An integer kept as another number would match that one (…993 is read as …992): refused,
      // as in a search body (core/json-values.ts); one kept as written (2^53, 10^20, 1.2e25 written out) is taken.
      if (/^-?\d+$/.test(text) && !Number.isSafeInteger(n) && losesDigits(text)) {
        return { mismatch: `needs a number that can be kept exactly, got ${text}: integers beyond ±9007199254740991 (2^53 − 1) lose digits` }
      }
      return n
    }
    case 'boolean':
      return text === 'true' ? true : text === 'false' ? false : mismatch(type, text)
    case 'date':
      return isCalendarDate(text) ? text : mismatch(type, text)
    case 'datetime':
      return normalizeTimestamp(text) ?? mismatch(type, text)
    case 'uuid':
      return isUuid(text) ? text.toLowerCase() : mismatch(type, text)
  }
}

// Years 0001–9999: PostgreSQL has no year 0 (1 BC follows AD 1), so 0000-… is no date there.
const DATE = /^(?!0000)\d{4}-\d{2}-\d{2}$/

/** Exactly `YYYY-MM-DD` naming a real day (2026-02-30 and 0000-01-01 are not); a full timestamp is rejected. */
export function isCalendarDate(text: string): boolean {
  if (!DATE.test(text)) return false
  const date = new Date(`${text}T00:00:00Z`)
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text
}

const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/

/**
 * `2026-01-31` or `2026-01-31T09:15[:00[.000]][Z|+01:00]` → `2026-01-31T09:15:00.000Z`. A date
 * alone is midnight UTC, and a timestamp without offset is UTC (the API speaks UTC, CONTRACT §1).
 * Normalizing here keeps the database session's time zone out of the comparison.
 */
export function normalizeTimestamp(text: string): string | null {
  const m = TIMESTAMP.exec(text)
  if (m === null || !isCalendarDate(m[1] ?? '')) return null
  const [hh = '00', mm = '00', ss = '00'] = [m[2], m[3], m[4]]
  if (Number(hh) > 23 || Number(mm) > 59 || Number(ss) > 59) return null
  const fraction = (m[5] ?? '').slice(0, 4)
  const ms = Date.parse(`${m[1]}T${hh}:${mm}:${ss}${fraction}${m[6] ?? 'Z'}`)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

function mismatch(type: FieldType, value: unknown): Mismatch {
  return { mismatch: `needs ${EXPECTED[type]}, got ${describeValue(value)}` }
}

/** A short, safe rendering of a user value for an error detail. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing'
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'string') return value.length <= 40 ? JSON.stringify(value) : `a string of ${value.length} characters`
  return String(value)
}
