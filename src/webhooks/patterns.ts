import type { Issue } from '../core/errors.js'
import { EVENT_TYPES } from '../outbox/cloud-event.js'

/** The event a `POST /webhooks/{id}/test` sends, to that webhook only (never subscribed to). */
export const TEST_EVENT_TYPE = 'webhook.test'

const FAMILIES = [...new Set(EVENT_TYPES.map((t) => t.slice(0, t.indexOf('.'))))]

/** Every accepted entry of `event_types`: a type, `<family>.*`, or `*`. */
export const EVENT_TYPE_PATTERNS: readonly string[] = ['*', ...FAMILIES.map((f) => `${f}.*`), ...EVENT_TYPES]

/** Issues (pointer `/event_types/<i>`) for entries that are neither a known type nor a pattern. */
export function eventTypeIssues(patterns: readonly string[]): Issue[] {
  if (patterns.length === 0 || patterns.length > WEBHOOK_LIMITS.eventTypes) {
    return [{ detail: `event_types must list 1 to ${WEBHOOK_LIMITS.eventTypes} event types or patterns`, pointer: '/event_types' }]
  }
  return patterns.flatMap((pattern, i) => EVENT_TYPE_PATTERNS.includes(pattern)
    ? patterns.indexOf(pattern) < i ? [{ detail: `event_types lists "${pattern}" twice`, pointer: `/event_types/${i}` }] : []
    : [{ detail: `unknown event type or pattern "${pattern}"; use one of ${EVENT_TYPE_PATTERNS.join(', ')}`, pointer: `/event_types/${i}` }])
}

/**
 * The sizes of a webhook's fields: the API's schemas (schemas.ts) and the service's own checks
 * (service.ts, for every caller: the console's forms have no schema) read them from here.
 */
/**
 * `perOrganization`: each webhook gets its own delivery of every event it selects, the event's
 * JSON in each, written in the stamping transaction (70 webhooks of one organization made a
 * 5,000-event batch 350,000 rows: outside amplification probe).
 */
export const WEBHOOK_LIMITS = { url: 2048, description: 2000, eventTypes: 50, perOrganization: 25 } as const

/**
 * Whether a webhook's patterns select an event type. The same rule in SQL lives in sql.ts
 * (`insertMatchingDeliveries`): `*` matches all, `asset.*` every type starting with `asset.`.
 */
export function matchesEventType(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))))
}
