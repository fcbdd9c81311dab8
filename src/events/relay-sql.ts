import { BACKGROUND_SQL, type Queryable } from '../store/db.js'
import { EVENT_COLUMNS, type StampedEventRow } from '../outbox/cloud-event.js'
import { highestPositionSql, type Stamping } from '../outbox/write.js'

/*
 * The statements of the event relay (relay.ts): stamping on PostgreSQL, the hand-over on PGlite,
 * retention. Each starts with BACKGROUND_SQL: it belongs to no request.
 */

/**
 * One advisory lock per store: stamping transactions of every server process are serialized by
 * it, which is what makes `sequence` follow commit order (decision 0003). Positions are per
 * organization (decision 0027): each stamp continues its organizations' highest. The lock's second
 * key is the store's schema: stores in other schemas of the same database (other deployments, or
 * the test suite's files running at once) each have their own relay and must not wait for, or
 * skip a round because of, each other's.
 */
export const RELAY_LOCK = 727_160_009
/** Waits for the relay lock, for the rest of the transaction (tests hold it with this statement too). */
export const HOLD_RELAY_LOCK = `SELECT pg_advisory_xact_lock(${RELAY_LOCK}, hashtext(current_schema()))`
const TRY_RELAY_LOCK = `SELECT pg_try_advisory_xact_lock(${RELAY_LOCK}, hashtext(current_schema())) AS ok`

/** Takes the relay lock for the transaction: waiting for it (`wait`), or only if it is free (false: another process holds it). */
export async function takeRelayLock(tx: Queryable, wait: boolean): Promise<boolean> {
  if (wait) {
    await tx.query(BACKGROUND_SQL + HOLD_RELAY_LOCK)
    return true
  }
  const got = await tx.query<{ ok: boolean }>(BACKGROUND_SQL + TRY_RELAY_LOCK)
  return got.rows[0]?.ok === true
}

/**
 * PGlite's hand-over: each organization with events above its mark (`event_handover_marks`, none:
 * 0), found by one probe of the feed's index (org_id, sequence) per organization.
 */
const UNHANDED = `organizations o LEFT JOIN event_handover_marks h ON h.org_id = o.id
  CROSS JOIN LATERAL (SELECT coalesce(h.handed_through, 0) AS handed) m`

/**
 * The one statement that gives events their positions after they were written: `rows` selects
 * `(org_id, id, n)`, the events to number in `n` order; each organization's continue its highest
 * position (decision 0027). `set` adds columns to set, `returning` what to return (the rows are
 * `e`, the numbered ones `u` with `n`, their organization `o`). The highest positions (`b`) are
 * materialized: inlined, PostgreSQL read them again for every row as the UPDATE ran, each read
 * walking the index entries the UPDATE had just added (1 s instead of 70 ms for 5,000 events).
 */
function numberEventsSql(rows: string, set = '', returning = ''): string {
  return `WITH u AS MATERIALIZED (
      SELECT r.org_id, r.id, r.n, row_number() OVER (PARTITION BY r.org_id ORDER BY r.n) AS k FROM (${rows}) r
    ), b AS MATERIALIZED (
      SELECT g.org_id, ${highestPositionSql('g.org_id')} AS base FROM (SELECT DISTINCT org_id FROM u) g
    )
    UPDATE events e SET sequence = b.base + u.k${set}
    FROM u JOIN b ON b.org_id = u.org_id JOIN organizations o ON o.id = u.org_id
    WHERE e.org_id = u.org_id AND e.id = u.id${returning ? ` RETURNING ${returning}` : ''}`
}

/** Whether events wait for the relay: without a position (`stamp`), or, on PGlite (`written`), also above their organization's mark. */
export async function eventsWaiting(db: Queryable, stamping: Stamping): Promise<boolean> {
  const result = stamping === 'stamp'
    ? await db.query<{ yes: boolean }>(BACKGROUND_SQL + 'SELECT EXISTS (SELECT 1 FROM events WHERE sequence IS NULL) AS yes', [], { prepare: 'kbis_events_unstamped' })
    : await db.query<{ yes: boolean }>(`${BACKGROUND_SQL}SELECT EXISTS (SELECT 1 FROM ${UNHANDED}
         WHERE EXISTS (SELECT 1 FROM events e WHERE e.org_id = o.id AND e.sequence > m.handed))
         OR EXISTS (SELECT 1 FROM events WHERE sequence IS NULL) AS yes`, [], { prepare: 'kbis_events_unhanded' })
  return result.rows[0]?.yes === true
}

/** Unstamped (on PGlite: not yet handed over) events plus stamped ones not yet published (kbis_events_pending). */
export async function countEventsPending(db: Queryable, stamping: Stamping): Promise<number> {
  const unstamped = '(SELECT count(*) FROM events WHERE sequence IS NULL)'
  const waiting = stamping === 'stamp'
    ? unstamped
    : `${unstamped} + (SELECT count(*) FROM ${UNHANDED} CROSS JOIN LATERAL (SELECT 1 FROM events e WHERE e.org_id = o.id AND e.sequence > m.handed) e)`
  const result = await db.query<{ n: number }>(`${BACKGROUND_SQL}SELECT ${waiting} + (SELECT count(*) FROM events WHERE pending_publish) AS n`)
  return Number(result.rows[0]?.n ?? 0)
}

/**
 * Drops a default of `events.sequence`: writers give it themselves (outbox/write.ts
 * eventPositionSql), and an earlier version drew it from `event_sequence` on PGlite (a copy of
 * such a store carries that default).
 */
export async function dropSequenceDefault(db: Queryable): Promise<void> {
  const column = await db.query<{ expr: string | null }>(
    `SELECT pg_get_expr(d.adbin, d.adrelid) AS expr FROM pg_attribute a
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = 'events'::regclass AND a.attname = 'sequence'`)
  if ((column.rows[0]?.expr ?? null) !== null) await db.query('ALTER TABLE events ALTER COLUMN sequence DROP DEFAULT')
}

/** The oldest events without a position, at most `limit`, in id order (a statement of its own, after the lock: its snapshot holds every earlier stamp). */
export async function selectUnstamped(tx: Queryable, limit: number): Promise<{ org_id: string; id: string }[]> {
  return (await tx.query<{ org_id: string; id: string }>(BACKGROUND_SQL + 'SELECT org_id, id FROM events WHERE sequence IS NULL ORDER BY id LIMIT $1', [limit])).rows
}

/**
 * Gives `rows` (in their order) their organizations' next positions, marked for publication with
 * `publishes`; answers how many it stamped and, when `whole`, the events themselves with their
 * organization's key and their rank `n` among `rows` (else none: returning and parsing every
 * event's document is a third of a stamp).
 */
export async function stampEvents(tx: Queryable, rows: readonly { org_id: string; id: string }[], publishes: boolean, whole: boolean):
    Promise<{ count: number; events: (StampedEventRow & { org_key: string; n: string })[] }> {
  const result = await tx.query<StampedEventRow & { org_key: string; n: string }>(BACKGROUND_SQL + numberEventsSql(
    'SELECT * FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS u(org_id, id, n)',
    ', pending_publish = $3', whole ? `${EVENT_COLUMNS}, o.key AS org_key, u.n` : 'e.id'),
    [rows.map((r) => r.org_id), rows.map((r) => r.id), publishes],
  )
  return { count: result.rows.length, events: whole ? result.rows : [] }
}

/**
 * PGlite: events written without a position (by SQL of another program, a copy of a PostgreSQL
 * store taken before its relay stamped them) get their organization's next positions, in id
 * order, in each hand-over round. Writers of this service always give one; the probe of
 * `events_unstamped` finds none.
 */
export async function numberUnpositioned(tx: Queryable): Promise<void> {
  await tx.query(BACKGROUND_SQL + numberEventsSql('SELECT org_id, id, row_number() OVER (ORDER BY id) AS n FROM events WHERE sequence IS NULL'))
}

/** An organization's events not handed over yet: above `handed`, up to `upto` (`n` of them). */
export interface HandoverRange {
  org_id: string
  handed: string
  upto: string
  n: string
}

/** Each organization's next events above its mark, at most `limit` of them, in organization id order. */
export async function selectHandoverRanges(tx: Queryable, limit: number): Promise<HandoverRange[]> {
  return (await tx.query<HandoverRange>(`${BACKGROUND_SQL}SELECT o.id AS org_id, m.handed, x.upto, x.n
     FROM ${UNHANDED}
     CROSS JOIN LATERAL (SELECT max(p.sequence) AS upto, count(*) AS n FROM (SELECT e.sequence FROM events e
       WHERE e.org_id = o.id AND e.sequence > m.handed ORDER BY e.sequence LIMIT $1) p) x
     WHERE x.n > 0 ORDER BY o.id`, [limit])).rows
}

/** The events of `ranges`, on the feed's index (org_id, sequence); parameters: the ranges' columns (rangeParams). */
const IN_RANGES = `unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(org_id, handed, upto)
  CROSS JOIN LATERAL (SELECT * FROM events e WHERE e.org_id = r.org_id AND e.sequence > r.handed AND e.sequence <= r.upto) e`

const rangeParams = (ranges: readonly HandoverRange[]) => [ranges.map((r) => r.org_id), ranges.map((r) => r.handed), ranges.map((r) => r.upto)]

/** Marks the events of `ranges` for publication (a NATS sink). */
export async function markForPublication(tx: Queryable, ranges: readonly HandoverRange[]): Promise<void> {
  await tx.query(`${BACKGROUND_SQL}UPDATE events x SET pending_publish = true
     FROM (SELECT e.org_id, e.id FROM ${IN_RANGES}) e WHERE x.org_id = e.org_id AND x.id = e.id`, rangeParams(ranges))
}

/** The events of `ranges` whole, with their organization's key, by organization and position. */
export async function selectRangeEvents(tx: Queryable, ranges: readonly HandoverRange[]): Promise<(StampedEventRow & { org_key: string })[]> {
  return (await tx.query<StampedEventRow & { org_key: string }>(`${BACKGROUND_SQL}SELECT ${EVENT_COLUMNS}, o.key AS org_key
     FROM ${IN_RANGES} JOIN organizations o ON o.id = r.org_id ORDER BY r.org_id, e.sequence`, rangeParams(ranges))).rows
}

/** Moves each organization's mark to the end of its range. */
export async function setHandoverMarks(tx: Queryable, ranges: readonly HandoverRange[]): Promise<void> {
  await tx.query(`${BACKGROUND_SQL}INSERT INTO event_handover_marks AS m (org_id, handed_through)
     SELECT org_id, upto FROM unnest($1::uuid[], $2::bigint[]) AS r(org_id, upto) ORDER BY org_id
     ON CONFLICT (org_id) DO UPDATE SET handed_through = EXCLUDED.handed_through`, [ranges.map((r) => r.org_id), ranges.map((r) => r.upto)])
}

/** Events one retention statement deletes at most. */
export const PURGE_BATCH = 10_000

/**
 * Deletes up to PURGE_BATCH stamped events older than `retentionDays`, each organization's in
 * sequence order (never one above a kept older one), and records per organization the highest
 * position purged (`event_retention`); returns how many it deleted. An event NATS has not yet
 * acknowledged (`pending_publish`: an outage longer than the retention) is kept, and with it every
 * later one of its organization: it is published once NATS is back (CONTRACT §13: at least once),
 * and the feed's positions stay one unbroken run from `purged_through` on.
 */
export async function purgeOldestEvents(tx: Queryable, retentionDays: number): Promise<number> {
  const result = await tx.query<{ n: number }>(`${BACKGROUND_SQL}WITH old AS (
       SELECT org_id, max(sequence) AS upto FROM events
       WHERE sequence IS NOT NULL AND time < now() - make_interval(days => $1::int) GROUP BY org_id
     ), cut AS (
       SELECT old.org_id, least(old.upto, coalesce(p.first - 1, old.upto)) AS upto FROM old
       CROSS JOIN LATERAL (SELECT min(e.sequence) AS first FROM events e WHERE e.org_id = old.org_id AND e.pending_publish) p
     ), victims AS (
       SELECT e.org_id, e.id FROM cut JOIN events e ON e.org_id = cut.org_id
       WHERE e.sequence IS NOT NULL AND e.sequence <= cut.upto
       ORDER BY e.org_id, e.sequence LIMIT ${PURGE_BATCH}
     ), gone AS (
       DELETE FROM events e USING victims v WHERE e.org_id = v.org_id AND e.id = v.id RETURNING e.org_id, e.sequence
     ), marks AS (
       INSERT INTO event_retention AS r (org_id, purged_through)
       SELECT org_id, max(sequence) FROM gone GROUP BY org_id ORDER BY org_id
       ON CONFLICT (org_id) DO UPDATE SET purged_through = greatest(r.purged_through, EXCLUDED.purged_through)
     )
     SELECT count(*) AS n FROM gone`,
    [retentionDays],
  )
  return Number(result.rows[0]?.n ?? 0)
}
