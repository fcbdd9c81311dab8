import { createRequire } from 'node:module'

/**
 * `timestamptz` values as both stores hand them over: Dates, parsed from the text PostgreSQL
 * sends. The API writes every timestamp as `2026-01-31T09:15:00Z` (CONTRACT §1), so a Date parsed
 * here also keeps that text under ISO_SECOND and core/time.ts `isoSecond` answers it without
 * formatting the Date again. Parsing and formatting 200 timestamps was a fifth of the CPU time of
 * a list page of 100 assets (postgres-date's parser, then `toISOString`).
 */
export const ISO_SECOND: unique symbol = Symbol('kbis.isoSecond')

/** A Date with the second-precision ISO text it was parsed from. */
export type StoreDate = Date & { [ISO_SECOND]?: string }

// What pg parses timestamptz with by default (its pg-types registers postgres-date, which has no
// types of its own): every other form (another time zone, infinity, years beyond 9999, BC) goes
// there. Not through pg: the embedded store's server does not load pg (≈ 50 ms of its start).
const general = createRequire(import.meta.url)('postgres-date') as (text: string) => Date

/**
 * `2026-01-31 09:15:00.123456+00` (a session in UTC, the common case) → a Date carrying
 * `2026-01-31T09:15:00Z`; anything else through the general parser.
 */
export function parseTimestamptz(text: string): Date {
  const n = text.length
  if (n >= 22 && text.charCodeAt(4) === 45 && text.charCodeAt(10) === 32 && text.charCodeAt(n - 3) === 43 && text.charCodeAt(n - 2) === 48 && text.charCodeAt(n - 1) === 48) {
    const day = text.slice(0, 10)
    const date: StoreDate = new Date(`${day}T${text.slice(11, n - 3)}Z`)
    if (!Number.isNaN(date.getTime())) {
      date[ISO_SECOND] = `${day}T${text.slice(11, 19)}Z`
      return date
    }
  }
  return general(text)
}

/**
 * `2026-01-31T09:15:00.123456+00:00`, a timestamptz as PostgreSQL writes it in JSON (a session in
 * UTC) → a Date carrying `2026-01-31T09:15:00Z`, as {@link parseTimestamptz}; any other form (an
 * offset, years beyond 9999) as Date reads ISO 8601.
 */
export function parseJsonTimestamptz(text: string): Date {
  const n = text.length
  if (n >= 25 && text.charCodeAt(4) === 45 && text.charCodeAt(10) === 84 && text.endsWith('+00:00')) {
    const date: StoreDate = new Date(`${text.slice(0, n - 6)}Z`)
    if (!Number.isNaN(date.getTime())) {
      date[ISO_SECOND] = `${text.slice(0, 19)}Z`
      return date
    }
  }
  return new Date(text)
}
