import { isoSecond } from '../core/time.js'
import { isoSecondSql } from '../store/sql.js'

/** The event types of CONTRACT §13 (webhooks add `webhook.test`, which never enters the feed). */
export const EVENT_TYPES = [
  'asset.created', 'asset.updated', 'asset.archived', 'asset.restored', 'asset.deleted',
  'relationship.created', 'relationship.deleted',
  'api_key.created', 'api_key.updated', 'api_key.deleted',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export interface EventActor {
  api_key_id: string | null
  user_id: string | null
}

/** `data` of every event: the record as GET returns it, the changed fields (`*.updated`), the actor. */
export interface EventData {
  object: Record<string, unknown>
  /** `from` is left out for a reader who could not see the asset before its move (events/sql.ts). */
  changes?: Record<string, { from?: unknown; to: unknown }>
  actor: EventActor
}

/**
 * A CloudEvents 1.0 event (JSON format), the same in the feed, in webhook bodies and on NATS
 * (CONTRACT §13). `sequence` is a decimal string, strictly increasing per organization in commit
 * order; `requestid` and `idempotencykey` are extension attributes.
 */
export interface CloudEvent {
  specversion: '1.0'
  id: string
  type: string
  source: string
  subject: string
  time: string
  datacontenttype: 'application/json'
  sequence: string
  requestid: string | null
  idempotencykey?: string
  data: EventData
}

/** An event row once the relay has stamped it (see relay.ts). */
export interface StampedEventRow {
  org_id: string
  id: string
  sequence: number | string
  type: string
  subject: string
  time: Date | string
  request_id: string | null
  idempotency_key: string | null
  data: EventData
}

/** The columns every read of stamped events selects (alias `e`). */
export const EVENT_COLUMNS = 'e.org_id, e.id, e.sequence, e.type, e.subject, e.time, e.request_id, e.idempotency_key, e.data'

/** `/organizations/acme`: the CloudEvents `source` of an organization's events. */
export function eventSource(orgKey: string): string {
  return `/organizations/${orgKey}`
}

/**
 * A stamped event of `events e` as the JSON text of its CloudEvent, written by the store: the
 * members of {@link toCloudEvent} in its order, strings escaped by `to_json` as JSON.stringify
 * escapes them, `data` as jsonb writes it, `time` to the second. `source` is the placeholder of a
 * parameter holding the organization's source as JSON text (`JSON.stringify(eventSource(key))`).
 * Feed pages pass the text on (decision 0017). `data` is the SQL of the `data` member (the stored
 * one, or {@link withoutFromSql} of it for a reader who may not see the values before a move).
 */
export function cloudEventJsonSql(source: string, data = 'e.data'): string {
  return `'{"specversion":"1.0","id":"' || e.id || '","type":' || to_json(e.type)::text
    || ',"source":' || ${source}::text || ',"subject":' || to_json(e.subject)::text
    || ',"time":"' || ${isoSecondSql('e.time')} || '","datacontenttype":"application/json","sequence":"' || e.sequence
    || '","requestid":' || coalesce(to_json(e.request_id)::text, 'null')
    || CASE WHEN e.idempotency_key IS NULL THEN '' ELSE ',"idempotencykey":' || to_json(e.idempotency_key)::text END
    || ',"data":' || (${data})::text || '}'`
}

/**
 * The jsonb document `doc` with the changes at `path` (`{changes}` in an event's data,
 * `{data,changes}` in a whole CloudEvent) kept without their `from` values. An asset moved out of
 * an access domain a reader cannot see into one it can is seen from its move on (CONTRACT §13),
 * but the values it held before the move belong to where it was hidden (§9): that reader gets the
 * fields that changed and their new values only.
 */
export function withoutFromSql(doc: string, path: '{changes}' | '{data,changes}'): string {
  return `jsonb_set(${doc}, '${path}', (SELECT jsonb_object_agg(c.key, c.value - 'from') FROM jsonb_each(${doc} #> '${path}') AS c))`
}

export function toCloudEvent(row: StampedEventRow, orgKey: string): CloudEvent {
  return {
    specversion: '1.0',
    id: row.id,
    type: row.type,
    source: eventSource(orgKey),
    subject: row.subject,
    time: isoSecond(row.time)!,
    datacontenttype: 'application/json',
    sequence: String(row.sequence),
    requestid: row.request_id,
    ...(row.idempotency_key !== null ? { idempotencykey: row.idempotency_key } : {}),
    data: row.data,
  }
}
