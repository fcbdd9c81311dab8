import { BACKGROUND_SQL, type Db, type Queryable } from '../store/db.js'
import { Params, selectPage, type PageRows } from '../store/sql.js'
import { TEST_EVENT_TYPE } from './patterns.js'
import { withoutFromSql } from '../outbox/cloud-event.js'

export interface WebhookRow {
  id: string
  url: string
  description: string | null
  event_types: string[]
  enabled: boolean
  created_at: Date
  updated_at: Date
}

const WEBHOOK_COLUMNS = 'id, url, description, event_types, enabled, created_at, updated_at'

/**
 * Whose sight a webhook gets (migration 0019): the caller that creates it or sets its URL — an API
 * key's roles its owner holds, a console user's roles.
 */
export interface WebhookViewer {
  userId: string
  roleKeys: readonly string[]
}

export interface NewWebhook {
  id: string
  url: string
  description: string | null
  event_types: string[]
  enabled: boolean
  secret: string
  viewer: WebhookViewer
}

/**
 * The viewer's roles that its user holds, in key order, as the value of `webhooks.role_keys`
 * (in statements that bind the organization as $1).
 */
function viewerRolesSql(params: Params, viewer: WebhookViewer): string {
  return `ARRAY(SELECT r FROM unnest(${params.add(viewer.roleKeys)}::text[]) AS r
                WHERE r IN (SELECT unnest(u.role_keys) FROM users u WHERE u.org_id = $1 AND u.id = ${params.add(viewer.userId)}) ORDER BY r)`
}

/**
 * Webhooks made before migration 0019 (no `role_keys`): they get every event of their
 * organization, hidden assets included, until a PATCH sets their url (docs/webhooks.md).
 */
export async function countUnscopedWebhooks(q: Queryable): Promise<number> {
  return (await q.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks WHERE role_keys IS NULL')).rows[0]!.n
}

/** The new webhook, or null when the organization has `limit` webhooks already. */
export async function insertWebhook(db: Db, orgId: string, w: NewWebhook, limit: number): Promise<WebhookRow | null> {
  const params = new Params([orgId, w.id, w.url, w.description, w.event_types, w.enabled, w.secret, limit])
  // Creates of one organization take turns: two at limit - 1 would otherwise both count below it.
  return db.transaction(async (tx) => {
    await tx.query(HOLD_ORG_WEBHOOKS, [orgId])
    const result = await tx.query<WebhookRow>(
      `INSERT INTO webhooks (org_id, id, url, description, event_types, enabled, secret, role_keys, created_at, updated_at)
       SELECT $1, $2, $3, $4, $5::text[], $6, $7, ${viewerRolesSql(params, w.viewer)}, date_trunc('second', now()), date_trunc('second', now())
       WHERE (SELECT count(*) FROM webhooks WHERE org_id = $1) < $8
       RETURNING ${WEBHOOK_COLUMNS}`,
      params.values,
    )
    return result.rows[0] ?? null
  })
}

const HOLD_ORG_WEBHOOKS = "SELECT pg_advisory_xact_lock(hashtext('kbis_webhooks'), hashtext($1::text))"

export async function selectWebhook(q: Queryable, orgId: string, id: string): Promise<WebhookRow | null> {
  const result = await q.query<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE org_id = $1 AND id = $2`, [orgId, id])
  return result.rows[0] ?? null
}

/** The organization's webhooks, oldest first. */
export async function selectWebhookPage(q: Queryable, orgId: string, limit: number, offset: number, exact: boolean): Promise<PageRows<WebhookRow>> {
  return selectPage<WebhookRow>(q, { select: WEBHOOK_COLUMNS, from: 'webhooks' },
    { where: 'org_id = $1', orderBy: 'created_at, id', limit, offset, params: new Params([orgId]) }, { exact })
}

export interface WebhookChange {
  url?: string
  description?: string | null
  event_types?: string[]
  enabled?: boolean
}

/**
 * Applies the members present in `change`; null when the webhook does not exist. Setting `url`
 * gives the webhook the sight of `viewer`, who now decides where its events go.
 */
export async function updateWebhook(q: Queryable, orgId: string, id: string, change: WebhookChange, viewer: WebhookViewer): Promise<WebhookRow | null> {
  const params = new Params([orgId, id])
  const sets: string[] = []
  if (change.url !== undefined) sets.push(`url = ${params.add(change.url)}`, `role_keys = ${viewerRolesSql(params, viewer)}`)
  if (change.description !== undefined) sets.push(`description = ${params.add(change.description)}`)
  if (change.event_types !== undefined) sets.push(`event_types = ${params.add(change.event_types)}::text[]`)
  if (change.enabled !== undefined) sets.push(`enabled = ${params.add(change.enabled)}`)
  if (sets.length === 0) return selectWebhook(q, orgId, id)
  const result = await q.query<WebhookRow>(
    `UPDATE webhooks SET ${sets.join(', ')}, updated_at = date_trunc('second', now())
     WHERE org_id = $1 AND id = $2 RETURNING ${WEBHOOK_COLUMNS}`,
    params.values,
  )
  return result.rows[0] ?? null
}

export async function deleteWebhook(q: Queryable, orgId: string, id: string): Promise<boolean> {
  return (await q.query('DELETE FROM webhooks WHERE org_id = $1 AND id = $2', [orgId, id])).rowCount > 0
}

/** The new secret signs from now on; the current one keeps signing for `overlapSeconds`. */
export async function rotateWebhookSecret(q: Queryable, orgId: string, id: string, secret: string, overlapSeconds: number): Promise<WebhookRow | null> {
  const result = await q.query<WebhookRow>(
    `UPDATE webhooks SET previous_secret = secret, previous_secret_until = now() + make_interval(secs => $4),
            secret = $3, updated_at = date_trunc('second', now())
     WHERE org_id = $1 AND id = $2 RETURNING ${WEBHOOK_COLUMNS}`,
    [orgId, id, secret, overlapSeconds],
  )
  return result.rows[0] ?? null
}

export interface DeliveryRow {
  id: string
  event_id: string
  event_type: string
  status: 'pending' | 'succeeded' | 'failed'
  attempts: number
  last_attempt_at: Date | null
  last_status_code: number | null
  last_error: string | null
  next_attempt_at: Date | null
}

const DELIVERY_COLUMNS = 'id, event_id, event_type, status, attempts, last_attempt_at, last_status_code, last_error, next_attempt_at'

/** A webhook's delivery log, newest first. */
export async function selectDeliveryPage(
  q: Queryable, orgId: string, webhookId: string, limit: number, offset: number, exact: boolean,
): Promise<PageRows<DeliveryRow>> {
  return selectPage<DeliveryRow>(q, { select: DELIVERY_COLUMNS, from: 'webhook_deliveries' }, {
    where: 'org_id = $1 AND webhook_id = $2', orderBy: 'created_at DESC, id DESC', limit, offset, params: new Params([orgId, webhookId]),
  }, { exact })
}

export interface NewDelivery {
  id: string
  webhookId: string
  eventId: string
  eventType: string
  payload: string
}

/**
 * One delivery due now (the test event); false when the webhook is gone. The webhook's row is
 * locked first (FOR KEY SHARE, as the foreign key's own check): a DELETE of it under way is waited
 * for and then leaves nothing to insert, instead of a foreign-key violation (a 500) at the insert.
 */
export async function insertDelivery(q: Queryable, orgId: string, d: NewDelivery): Promise<boolean> {
  const result = await q.query(
    `WITH w AS (SELECT id FROM webhooks WHERE org_id = $1 AND id = $3 FOR KEY SHARE)
     INSERT INTO webhook_deliveries (org_id, id, webhook_id, event_id, event_type, payload, status, next_attempt_at)
     SELECT $1, $2, w.id, $4, $5, $6, 'pending', now() FROM w`,
    [orgId, d.id, d.webhookId, d.eventId, d.eventType, d.payload],
  )
  return result.rowCount > 0
}

/**
 * Queues a delivery again, due now, whatever its state. An attempt in flight loses its lease: its
 * outcome is not recorded and the delivery is sent again (at least once). False when unknown.
 */
export async function requeueDelivery(q: Queryable, orgId: string, webhookId: string, id: string): Promise<boolean> {
  const result = await q.query(
    `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), lease_token = NULL
     WHERE org_id = $1 AND webhook_id = $2 AND id = $3`,
    [orgId, webhookId, id],
  )
  return result.rowCount > 0
}

/** Webhook `w` takes every event: no roles (made before migration 0019), or a grant of every type in every domain. */
const SEES_ALL = `(w.role_keys IS NULL OR EXISTS (SELECT 1 FROM roles r CROSS JOIN LATERAL jsonb_array_elements(r.grants) AS g
                   WHERE r.org_id = w.org_id AND r.key = ANY (w.role_keys)
                     AND g->>'access_domain_key' = '*' AND g->'asset_type_keys' @> '["*"]'))`

/** What an organization's enabled webhooks want: every pattern, and whether one of them sees less than everything. */
export interface EnabledWebhooks {
  patterns: string[]
  scoped: boolean
}

/** The enabled webhooks of these organizations, by organization (one statement per stamped batch). */
export async function selectEnabledWebhooks(q: Queryable, orgIds: readonly string[]): Promise<Map<string, EnabledWebhooks>> {
  const result = await q.query<{ org_id: string; patterns: string[]; scoped: boolean }>(
    `${BACKGROUND_SQL}SELECT w.org_id, array_agg(DISTINCT p.pattern) AS patterns, bool_or(NOT ${SEES_ALL}) AS scoped
     FROM webhooks w, unnest(w.event_types) AS p(pattern)
     WHERE w.org_id = ANY($1::uuid[]) AND w.enabled GROUP BY w.org_id`,
    [orgIds],
  )
  return new Map(result.rows.map((r) => [r.org_id, { patterns: r.patterns, scoped: r.scoped }]))
}

// A UUIDv7 made in SQL (PostgreSQL 17 has no uuidv7()): gen_random_uuid()'s bytes with the first six
// replaced by the Unix time in milliseconds and the version nibble turned from 4 into 7.
const UUID_V7_SQL = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
  placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid`

export interface EventToDeliver {
  orgId: string
  id: string
  type: string
  /** The exact JSON text every attempt sends. */
  payload: string
}

/**
 * Whether the grants of webhook `w`'s roles reach an asset of type `${type}` in access domain
 * `${domain}` (columns of the event row `s`), at any level: the feed's rule (events/sql.ts
 * visibleEvents) over the roles as they are now.
 */
const webhookSees = (type: string, domain: string): string =>
  `EXISTS (SELECT 1 FROM roles r CROSS JOIN LATERAL jsonb_array_elements(r.grants) AS g
           WHERE r.org_id = w.org_id AND r.key = ANY (w.role_keys)
             AND (g->>'access_domain_key' = '*' OR g->>'access_domain_key' = ${domain}
                  OR (jsonb_typeof(g->'access_domain_key') = 'null' AND ${domain} IS NULL))
             AND (g->'asset_type_keys' @> '["*"]' OR g->'asset_type_keys' @> jsonb_build_array(${type})))`

/**
 * One statement for a whole batch of events: every event × every enabled webhook of its
 * organization whose patterns select its type (`*`, the type itself, or `family.*`: the same rule
 * as patterns.ts `matchesEventType`) and whose roles see it, as a key with those roles reads the
 * feed: an asset event when they reach the asset's type and access domain at the event, a
 * relationship event when they reach both ends; API key events always (webhooks are an Admin's).
 * A webhook without roles (made before migration 0019) takes every event. Returns how many
 * deliveries were queued.
 */
export async function insertMatchingDeliveries(tx: Queryable, events: readonly EventToDeliver[], scoped: boolean): Promise<number> {
  if (events.length === 0) return 0
  // Only when some enabled webhook sees less than everything (`scoped`, selectEnabledWebhooks) are
  // the events' scoping columns read (a join to `events` per event). The usual organization-wide
  // webhook (roles that reach every type in every domain, or none set) takes what its patterns select.
  const visible = scoped
    ? `LEFT JOIN events s ON NOT ${SEES_ALL} AND s.org_id = e.org_id AND s.id = e.event_id
     WHERE ${SEES_ALL} OR s.asset_id IS NULL
        OR (${webhookSees('s.asset_type_key', 's.access_domain_key')}
            AND (s.related_asset_id IS NULL OR ${webhookSees('s.related_asset_type_key', 's.related_access_domain_key')}))`
    : ''
  const result = await tx.query(
    `${BACKGROUND_SQL}INSERT INTO webhook_deliveries (org_id, id, webhook_id, event_id, event_type, payload, status, next_attempt_at)
     SELECT e.org_id, ${UUID_V7_SQL}, w.id, e.event_id, e.event_type, e.payload, 'pending', now()
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) AS e(org_id, event_id, event_type, payload)
     JOIN webhooks w ON w.org_id = e.org_id AND w.enabled
      AND EXISTS (SELECT 1 FROM unnest(w.event_types) AS p(pattern)
                  WHERE p.pattern = '*' OR p.pattern = e.event_type
                     OR (right(p.pattern, 2) = '.*' AND starts_with(e.event_type, left(p.pattern, -1))))
     ${visible}
     ON CONFLICT (org_id, webhook_id, event_id) DO NOTHING`,
    [events.map((e) => e.orgId), events.map((e) => e.id), events.map((e) => e.type), events.map((e) => e.payload)],
  )
  return result.rowCount
}

export interface ClaimedDelivery {
  org_id: string
  id: string
  lease_token: string
  webhook_id: string
  event_id: string
  payload: string
  attempts: number
  url: string
  enabled: boolean
  /** A `webhook.test` event: sent to a disabled webhook too (an Admin checks a receiver before enabling it again). */
  is_test: boolean
  secret: string
  /** Still signing (within 24 h of a rotation), else null. */
  previous_secret: string | null
  /**
   * Whether the webhook's roles, as they are now, see the event: false for an event queued
   * under the scope of an earlier URL (a PATCH that set `url` takes the new key's roles) that the
   * new one does not reach, so a retry or a pending delivery never hands it to the new URL.
   */
  visible: boolean
}

/**
 * Claims up to `limit` due deliveries for this sender: the rows are locked with SKIP LOCKED (two
 * senders never claim one row), and in the same statement (its own transaction) their
 * `next_attempt_at` moves to the end of the lease and `lease_token` names this claim. The HTTP
 * requests then run outside any transaction.
 *
 * Webhooks take turns: every webhook's oldest due delivery comes first, then every webhook's
 * second, and so on (each webhook's own in due order). One webhook with thousands due — a receiver
 * that hangs until the timeout — takes the whole room only while no other webhook has one due;
 * another's delivery waits at most for one slot to come free, not for the backlog before it.
 */
export async function claimDeliveries(q: Queryable, limit: number, leaseSeconds: number, leaseToken: string): Promise<ClaimedDelivery[]> {
  const result = await q.query<ClaimedDelivery>(
    `${BACKGROUND_SQL}WITH locked AS (
       SELECT x.org_id, x.id, x.webhook_id, x.next_attempt_at FROM webhooks w
       CROSS JOIN LATERAL (
         SELECT d.org_id, d.id, d.webhook_id, d.next_attempt_at FROM webhook_deliveries d
         WHERE d.org_id = w.org_id AND d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= now()
         ORDER BY d.next_attempt_at
         LIMIT $1
         FOR UPDATE SKIP LOCKED
       ) x
     ), due AS (
       SELECT org_id, id FROM (
         SELECT org_id, id, next_attempt_at, row_number() OVER (PARTITION BY org_id, webhook_id ORDER BY next_attempt_at) AS turn FROM locked
       ) turns
       ORDER BY turn, next_attempt_at
       LIMIT $1
     ), claimed AS (
       UPDATE webhook_deliveries d SET next_attempt_at = now() + make_interval(secs => $2), lease_token = $3
       FROM due WHERE d.org_id = due.org_id AND d.id = due.id
       RETURNING d.org_id, d.id, d.lease_token, d.webhook_id, d.event_id, d.event_type, d.payload, d.attempts
     ), hooks AS MATERIALIZED (
       -- Once per webhook, not per delivery: whether its roles see everything.
       SELECT w.*, ${SEES_ALL} AS sees_all FROM webhooks w
       WHERE (w.org_id, w.id) IN (SELECT org_id, webhook_id FROM claimed)
     )
     SELECT c.org_id, c.id, c.lease_token, c.webhook_id, c.event_id, c.attempts, w.url, w.enabled, w.secret,
            -- A move out of a domain the roles do not see: the changes without their values before it (events/sql.ts).
            CASE WHEN s.moved_unseen THEN (${withoutFromSql('c.payload::jsonb', '{data,changes}')})::text ELSE c.payload END AS payload,
            c.event_type = '${TEST_EVENT_TYPE}' AS is_test,
            CASE WHEN w.previous_secret_until > now() THEN w.previous_secret END AS previous_secret,
            (w.sees_all OR c.event_type = '${TEST_EVENT_TYPE}' OR coalesce(s.visible, false)) AS visible
     FROM claimed c JOIN hooks w ON w.org_id = c.org_id AND w.id = c.webhook_id
     -- The event's scoping columns, read once, only for a webhook whose roles see less than everything.
     LEFT JOIN LATERAL (
       SELECT (s.asset_id IS NULL OR (${webhookSees('s.asset_type_key', 's.access_domain_key')}
                 AND (s.related_asset_id IS NULL OR ${webhookSees('s.related_asset_type_key', 's.related_access_domain_key')}))) AS visible,
              (s.type = 'asset.updated' AND s.data #> '{changes,access_domain_key}' IS NOT NULL
                 AND NOT ${webhookSees('s.asset_type_key', "(s.data #>> '{changes,access_domain_key,from}')")}) AS moved_unseen
       FROM events s WHERE s.org_id = c.org_id AND s.id = c.event_id
     ) s ON NOT w.sees_all AND c.event_type <> '${TEST_EVENT_TYPE}'`,
    [limit, leaseSeconds, leaseToken],
  )
  return result.rows
}

export interface DeliveryOutcome {
  orgId: string
  id: string
  webhookId: string
  leaseToken: string
  status: 'pending' | 'succeeded' | 'failed'
  /** False when nothing was sent (the webhook was disabled meanwhile). */
  attempted: boolean
  attemptedAt: Date
  statusCode: number | null
  error: string | null
  nextAttemptAt: Date | null
  /** The receiver answered 410 Gone: the webhook is disabled. */
  gone: boolean
}

/**
 * Records a batch of outcomes in one transaction: one UPDATE for the deliveries (only those whose
 * lease this sender still holds), one for the webhooks that answered 410.
 */
export async function recordOutcomes(db: Db, outcomes: readonly DeliveryOutcome[]): Promise<void> {
  const write = async (tx: Queryable): Promise<void> => {
    await tx.query(
      `${BACKGROUND_SQL}UPDATE webhook_deliveries d
       SET status = o.status,
           attempts = d.attempts + CASE WHEN o.attempted THEN 1 ELSE 0 END,
           last_attempt_at = CASE WHEN o.attempted THEN o.attempted_at ELSE d.last_attempt_at END,
           last_status_code = CASE WHEN o.attempted THEN o.status_code ELSE d.last_status_code END,
           last_error = o.error, next_attempt_at = o.next_attempt_at, lease_token = NULL
       FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::boolean[], $6::timestamptz[], $7::int[], $8::text[], $9::timestamptz[])
            AS o(org_id, id, lease_token, status, attempted, attempted_at, status_code, error, next_attempt_at)
       WHERE d.org_id = o.org_id AND d.id = o.id AND d.lease_token = o.lease_token`,
      [
        outcomes.map((o) => o.orgId), outcomes.map((o) => o.id), outcomes.map((o) => o.leaseToken), outcomes.map((o) => o.status),
        outcomes.map((o) => o.attempted), outcomes.map((o) => o.attemptedAt.toISOString()), outcomes.map((o) => o.statusCode),
        outcomes.map((o) => o.error), outcomes.map((o) => o.nextAttemptAt?.toISOString() ?? null),
      ],
    )
    const gone = outcomes.filter((o) => o.gone)
    if (gone.length > 0) {
      await tx.query(
        `${BACKGROUND_SQL}UPDATE webhooks SET enabled = false, updated_at = date_trunc('second', now())
         WHERE (org_id, id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) AND enabled`,
        [gone.map((o) => o.orgId), gone.map((o) => o.webhookId)],
      )
    }
  }
  if (outcomes.length > 0) await db.transaction(write)
}

export async function selectDelivery(q: Queryable, orgId: string, webhookId: string, id: string): Promise<DeliveryRow | null> {
  const result = await q.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2 AND id = $3`, [orgId, webhookId, id])
  return result.rows[0] ?? null
}

/**
 * Retention of the delivery log: deletes up to `limit` finished deliveries (succeeded, failed)
 * created more than `days` days ago, oldest first; returns how many. Pending deliveries stay.
 */
export async function deleteFinishedDeliveries(q: Queryable, days: number, limit: number): Promise<number> {
  const result = await q.query<{ n: number }>(`${BACKGROUND_SQL}WITH victims AS (
       SELECT org_id, id FROM webhook_deliveries
       WHERE status <> 'pending' AND created_at < now() - make_interval(days => $1::int)
       ORDER BY created_at LIMIT $2
     ), gone AS (
       DELETE FROM webhook_deliveries d USING victims v WHERE d.org_id = v.org_id AND d.id = v.id RETURNING 1
     )
     SELECT count(*)::int AS n FROM gone`, [days, limit])
  return Number(result.rows[0]?.n ?? 0)
}
