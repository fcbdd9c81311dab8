import { connect } from '@nats-io/transport-node'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { BACKGROUND_SQL, type Db } from '../store/db.js'
import { EVENT_COLUMNS, toCloudEvent, type StampedEventRow } from '../outbox/cloud-event.js'
import type { EventRelay, StampedEvent } from './relay.js'

/** Bytes of a message's max_payload left to its headers (NATS counts them in the limit). */
const HEADERS_MARGIN = 1024

export interface NatsOptions {
  url: string
  stream: string
  /** Republish events a crash left unpublished, this often (ms). */
  sweepIntervalMs?: number
  /** A publication failed; `repeated` when the one before had failed too (NATS still unreachable). */
  onError?: (err: unknown, repeated: boolean) => void
  /** Events were published again after failures. */
  onResumed?: () => void
  /** An event too large for the server's max_payload was published without its data. */
  onOversized?: (eventId: string, bytes: number, maxPayload: number) => void
  /** Gives the attempt up: a connection still being made is closed whenever it is made. */
  signal?: AbortSignal
}

/** The subjects of the stream the sink creates: every `kbis.<organization key>.<event type>`. */
export const NATS_SUBJECTS = 'kbis.>'

/** The NATS server answered, but the stream could neither be found nor created. */
export class NatsStreamError extends Error {
  constructor(stream: string, cause: unknown) {
    super(`NATS stream ${stream} (subjects ${NATS_SUBJECTS}) could not be found or created: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'NatsStreamError'
  }
}

/** The most events the sink's queue holds for publication; beyond it they wait for a sweep. */
export const QUEUE_LIMIT = 20_000

/**
 * How long a NATS server may take to greet a new connection (nats.js waits 20 s by default): one
 * that accepts the connection and says nothing (a frozen machine) counts as unreachable, and the
 * next attempt comes 5 s later.
 */
export const CONNECT_TIMEOUT_MS = 5_000

/**
 * A connection whose PINGs go unanswered NATS_MAX_PINGS_OUT times in a row is taken for dead and
 * made again: one that stopped carrying anything back (a half-open TCP connection, a NAT or
 * firewall that dropped the flow) while the server and new connections are fine. nats.js's own
 * default (2 minutes, twice) left publications failing for 4–6 minutes; with these, 10–15 s. A
 * PING is 6 bytes.
 */
export const NATS_PING_INTERVAL_MS = 5_000
export const NATS_MAX_PINGS_OUT = 2

/**
 * The longest a closing sink waits for the publications in flight and for NATS to confirm the
 * connection's end (nats.js's drain waits for an answer with no time-out). What it did not
 * confirm stays pending in the store, and the next process's first sweep publishes it.
 */
export const CLOSE_TIMEOUT_MS = 5_000

/** `kbis.<organization key>.<event type>` (CONTRACT §13). */
export function natsSubject(orgKey: string, type: string): string {
  return `kbis.${orgKey}.${type}`
}

/**
 * The NATS JetStream sink (CONTRACT §13): publishes every stamped event after its stamping
 * transaction committed, with `Nats-Msg-Id` = the event id (the stream drops duplicates), then
 * clears the event's `pending_publish`. Events still pending — the process died between commit and
 * publication, or NATS was down — are published again by a periodic sweep of any process: at
 * least once.
 */
export async function attachNats(relay: EventRelay, db: Db, options: NatsOptions): Promise<{ close(): Promise<void> }> {
  const { signal } = options
  const nc = await abortable(connect({
    servers: options.url, reconnect: true, maxReconnectAttempts: -1, timeout: CONNECT_TIMEOUT_MS,
    pingInterval: NATS_PING_INTERVAL_MS, maxPingOut: NATS_MAX_PINGS_OUT,
  }), signal)
  // Given up while the stream is looked up or created: closing the connection ends its requests.
  const giveUp = () => void nc.close().catch(() => undefined)
  signal?.addEventListener('abort', giveUp, { once: true })
  try {
    const jsm = await jetstreamManager(nc)
    await jsm.streams.info(options.stream).catch(async () => jsm.streams.add({ name: options.stream, subjects: [NATS_SUBJECTS] }))
  } catch (err) {
    // Connected, but the stream cannot be had (say another stream of this server already takes
    // `kbis.>`): not a connection problem, and this connection is not kept for the next attempt.
    await nc.close().catch(() => undefined)
    signal?.throwIfAborted()
    throw new NatsStreamError(options.stream, err)
  } finally {
    signal?.removeEventListener('abort', giveUp)
  }
  if (signal?.aborted) {
    await nc.close().catch(() => undefined)
    signal.throwIfAborted()
  }
  const js = jetstream(nc)
  const encoder = new TextEncoder()

  // An event larger than the server's max_payload (a PATCH of a megabyte text, from and to) cannot
  // be published: in its place goes the event without `data`, `dataomitted: true`, under its id, so
  // that a consumer learns of it and reads it whole from GET /events. It used to fail its batch
  // again and again, holding every later event pending (and re-sending those, stored again once
  // the stream's duplicate window had passed).
  const payloadOf = (event: StampedEvent['event']): Uint8Array => {
    const whole = encoder.encode(JSON.stringify(event))
    const max = nc.info?.max_payload
    // The limit holds the headers too (Nats-Msg-Id and JetStream's own): a margin for them.
    if (max === undefined || whole.length + HEADERS_MARGIN <= max) return whole
    options.onOversized?.(event.id, whole.length, max)
    return encoder.encode(JSON.stringify({ ...event, data: null, dataomitted: true }))
  }
  const publish = async (events: StampedEvent[]): Promise<void> => {
    if (events.length === 0) return
    const results = await Promise.allSettled(events.map(({ orgKey, event }) =>
      js.publish(natsSubject(orgKey, event.type), payloadOf(event), { msgID: event.id })))
    // What was published is done, whatever became of the rest: not sent again by the next sweep.
    const done = events.filter((_, i) => results[i]!.status === 'fulfilled')
    if (done.length > 0) {
      await db.query(BACKGROUND_SQL + 'UPDATE events SET pending_publish = false FROM unnest($1::uuid[], $2::uuid[]) AS u(org_id, id) WHERE events.org_id = u.org_id AND events.id = u.id',
        [done.map((e) => e.orgId), done.map((e) => e.event.id)],
      )
    }
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failure) throw failure.reason
  }

  // While publications fail, the relay's batches are left pending for the sweeps; the first
  // failure is reported whole, the next ones as repeats, and the first sweep that publishes again
  // ends the outage.
  let down = false
  const failed = (err: unknown): void => {
    options.onError?.(err, down)
    down = true
  }

  // Periodic sweeps leave the events of the last 10 s to the process that stamped them; the first
  // one, right after this sink joined the relay, takes every pending event. One at a time: a sweep
  // waiting out NATS's time-out does not start another.
  let sweeping = false
  const sweep = async (minAgeSeconds: number): Promise<void> => {
    if (sweeping) return
    sweeping = true
    try {
      // While publications fail, the relay hands nothing over: the sweep that ends the outage takes
      // every pending event, the last seconds' too, so that they go out in stamping order.
      if (down) minAgeSeconds = 0
      let published = 0
      for (;;) {
        const rows = await db.query<StampedEventRow & { org_key: string }>(`${BACKGROUND_SQL}SELECT ${EVENT_COLUMNS}, o.key AS org_key FROM events e JOIN organizations o ON o.id = e.org_id
           WHERE e.pending_publish AND e.time <= now() - make_interval(secs => $1) ORDER BY e.sequence LIMIT 1000`,
          [minAgeSeconds],
        )
        await publish(rows.rows.map((r) => ({ orgId: r.org_id, orgKey: r.org_key, event: toCloudEvent(r, r.org_key) })))
        published += rows.rows.length
        if (rows.rows.length < 1000) break
      }
      // Nothing left to publish (another process did): NATS answering is the outage's end here too.
      if (down && (published > 0 || (await nc.rtt().then(() => true, () => false)))) {
        down = false
        options.onResumed?.()
      }
    } catch (err) {
      failed(err)
    } finally {
      sweeping = false
    }
  }

  // The relay's batches are published in this sink's own queue, in stamping order, never in the
  // relay's: its next round (which every feed read waits for on PostgreSQL) and the webhooks'
  // deliveries do not wait for NATS's answer, nor for its time-out while NATS is unreachable. The
  // queue holds at most QUEUE_LIMIT events; beyond that, and while NATS fails, events stay
  // pending in the store for the sweeps.
  let queue: Promise<void> = Promise.resolve()
  let queued = 0
  relay.onCommitted((events) => {
    if (events.length === 0 || down || queued + events.length > QUEUE_LIMIT) return
    queued += events.length
    queue = queue
      .then(() => (down ? undefined : publish(events)))
      .catch(failed)
      .finally(() => { queued -= events.length })
  })
  const timer = setInterval(() => void sweep(10), options.sweepIntervalMs ?? 5_000)
  timer.unref()
  void sweep(0)
  const close = async () => {
    clearInterval(timer)
    // What the relay handed over last (its final round at shutdown included) goes out first, then
    // the connection ends; a NATS that stopped answering gets CLOSE_TIMEOUT_MS for both.
    const deadline = Date.now() + CLOSE_TIMEOUT_MS
    await within(queue, deadline)
    await within(nc.drain().catch(() => undefined), deadline)
    await nc.close().catch(() => undefined)
  }
  relay.onStopped(close)
  return { close }
}

/** `promise`, or a rejection when `signal` aborts first; what it resolves to after that is closed. */
async function abortable<T extends { close(): Promise<void> }>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    promise.then((value) => {
      signal.removeEventListener('abort', onAbort)
      if (signal.aborted) void value.close().catch(() => undefined)
      else resolve(value)
    }, (err: unknown) => {
      signal.removeEventListener('abort', onAbort)
      reject(err)
    })
  })
}

/** Waits for `promise` until `deadline` (ms since the epoch) at the latest. */
async function within(promise: Promise<unknown>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([promise, new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())) })])
  clearTimeout(timer)
}
