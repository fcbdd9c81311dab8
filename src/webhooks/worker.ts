import http from 'node:http'
import https from 'node:https'
import { BACKGROUND_SQL, type Db } from '../store/db.js'
import { newId } from '../core/time.js'
import { metrics } from '../ops/metrics.js'
import { claimDeliveries, recordOutcomes, type ClaimedDelivery, type DeliveryOutcome } from './sql.js'
import { signatureHeader } from './signing.js'
import { guardedLookup, hostOf, literalAddressProblem, RefusedAddressError } from './ssrf.js'

/** The notification channel that tells every sender on the store a delivery is due now. */
export const WEBHOOK_CHANNEL = 'kbis_webhooks'

export interface WorkerOptions {
  db: Db
  /** Seconds before each retry; after the last one the delivery is failed. */
  retrySchedule: readonly number[]
  allowPrivate: boolean
  timeoutMs: number
  pollMs: number
  /** Deliveries in flight at once in this process. */
  concurrency: number
  onError?: (err: unknown, what: string) => void
}

interface AttemptResult {
  statusCode: number | null
  retryAfterSeconds: number | null
  error: string | null
  /** The address is refused by the SSRF guard: final, no retry. */
  refused: boolean
}

/** Largest claim: one statement hands out this many deliveries at most. */
const MAX_CLAIM = 500
/** Outcomes wait this long to be written together. */
const FLUSH_DELAY_MS = 10
/** A receiver's Retry-After is honoured up to a week. */
const MAX_RETRY_AFTER_SECONDS = 7 * 86400

/**
 * An HTTP date begins with its day's name (RFC 9110 §5.6.7: `Sun, 06 Nov 1994 08:49:37 GMT`, and
 * the obsolete `Sunday, 06-Nov-94 …` and `Sun Nov  6 …`). Date.parse alone also reads `1.5`, `-5`
 * or `2` as dates long past, which would make a retry immediate.
 */
const HTTP_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /

/**
 * `Retry-After`: delay-seconds or an HTTP date (RFC 9110 §10.2.3); null when absent or unreadable
 * (`1.5`, `-5`: the schedule applies).
 */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim()
  if (text === undefined || text === '') return null
  if (/^\d+$/.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS)
  if (!HTTP_DATE.test(text)) return null
  const date = Date.parse(text)
  if (Number.isNaN(date)) return null
  return Math.min(Math.max(0, Math.ceil((date - now) / 1000)), MAX_RETRY_AFTER_SECONDS)
}

/** ±10 % jitter, so that deliveries failed together do not all come back at the same instant. */
function jitter(seconds: number): number {
  return seconds * (0.9 + Math.random() * 0.2)
}

function describeError(err: NodeJS.ErrnoException, timeoutMs: number): string {
  if (err instanceof RefusedAddressError) return err.message
  if (err.code === 'ETIMEDOUT_WEBHOOK') return `no answer within ${timeoutMs / 1000} s`
  if (err.code === 'ECONNREFUSED') return 'connection refused'
  if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') return `the host name does not resolve (${err.code})`
  if (err.code === 'ECONNRESET') return 'connection reset by the receiver'
  return err.code ? `request failed (${err.code})` : `request failed: ${err.message}`
}

/**
 * The webhook sender (CONTRACT §14, docs/decisions/0005-webhook-delivery.md). Claims due
 * deliveries in batches (`FOR UPDATE SKIP LOCKED`, with a lease), POSTs them outside any
 * transaction with at most `concurrency` in flight, and records the outcomes in batches. Any number
 * of processes run one each on a store; none sends a delivery another holds a lease on.
 *
 * It sleeps until the store has a webhook (a process without webhooks issues no statement after
 * its first), then polls every `pollMs` and whenever a delivery is queued (`wake`, and the
 * `kbis_webhooks` notification from other processes on PostgreSQL).
 */
/** Retries due within this long get a timer of their own (wakeAt), in slots of WAKE_SLOT_MS. */
const WAKE_HORIZON_MS = 60_000
const WAKE_SLOT_MS = 100

export class WebhookWorker {
  private running = false
  private active = false
  private poll: NodeJS.Timeout | null = null
  private claiming = false
  private again = false
  private saturated = false
  private inFlight = 0
  private outcomes: DeliveryOutcome[] = []
  private flushing: Promise<void> | null = null
  private flushTimer: NodeJS.Timeout | null = null
  private idle: (() => void) | null = null
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly wakeSlots = new Set<number>()
  private agents: { http: http.Agent; https: https.Agent } | null = null
  private listening = false
  private readonly leaseSeconds: number

  constructor(private readonly options: WorkerOptions) {
    // Past the lease a delivery whose sender died (kill -9) is due again: longer than any attempt.
    this.leaseSeconds = Math.ceil((2 * options.timeoutMs) / 1000) + 5
  }

  async start(): Promise<void> {
    if (this.running) return
    this.running = true
    const agent = { keepAlive: true, maxSockets: this.options.concurrency }
    this.agents = { http: new http.Agent(agent), https: new https.Agent(agent) }
    if (!this.listening) {
      this.listening = true
      await this.options.db.listen(WEBHOOK_CHANNEL, () => this.wake())
    }
    const any = await this.options.db.query<{ any: boolean }>(`${BACKGROUND_SQL}SELECT EXISTS (SELECT 1 FROM webhooks) AS any`)
    if (any.rows[0]?.any) this.wake()
  }

  /** A delivery may be due now: claim at once, and from now on poll. */
  wake(): void {
    if (!this.running) return
    if (!this.active) {
      this.active = true
      this.poll = setInterval(() => this.tick(), this.options.pollMs)
      this.poll.unref()
    }
    this.tick()
  }

  /** Tells every sender on the store (this one included) that a delivery is due now. */
  async notify(): Promise<void> {
    await this.options.db.notify(WEBHOOK_CHANNEL, '')
  }

  /** Stops claiming, lets the requests in flight finish and records their outcomes. */
  async stop(): Promise<void> {
    this.running = false
    this.active = false
    if (this.poll) clearInterval(this.poll)
    this.poll = null
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    this.wakeSlots.clear()
    while (this.claiming || this.inFlight > 0) await new Promise<void>((resolve) => { this.idle = resolve })
    if (this.flushTimer) clearTimeout(this.flushTimer)
    this.flushTimer = null
    await this.flush()
    this.agents?.http.destroy()
    this.agents?.https.destroy()
    this.agents = null
  }

  private tick(): void {
    if (!this.running) return
    if (this.claiming) {
      this.again = true
      return
    }
    this.claiming = true
    void this.claimLoop().finally(() => {
      this.claiming = false
      this.settle()
      if (this.again && this.running) {
        this.again = false
        this.tick()
      }
    })
  }

  private async claimLoop(): Promise<void> {
    try {
      while (this.running) {
        const room = Math.min(this.options.concurrency - this.inFlight, MAX_CLAIM)
        // No room: more may be due; each finished delivery claims again.
        this.saturated = room <= 0
        if (room <= 0) return
        const batch = await claimDeliveries(this.options.db, room, this.leaseSeconds, newId())
        for (const delivery of batch) void this.deliver(delivery)
        if (batch.length < room) return
      }
    } catch (err) {
      this.options.onError?.(err, 'claiming webhook deliveries failed')
    }
  }

  private settle(): void {
    if (!this.claiming && this.inFlight === 0 && this.idle) {
      const idle = this.idle
      this.idle = null
      idle()
    }
  }

  private async deliver(d: ClaimedDelivery): Promise<void> {
    this.inFlight++
    const attemptedAt = new Date()
    try {
      const result = (d.enabled || d.is_test) && d.visible ? await this.post(d) : null
      const outcome = this.decide(d, result, attemptedAt)
      metrics.webhookDeliveries.inc({ outcome: outcome.status === 'succeeded' ? 'delivered' : outcome.status === 'pending' ? 'retrying' : 'failed' })
      this.outcomes.push(outcome)
      this.scheduleFlush()
    } catch (err) {
      this.options.onError?.(err, 'a webhook delivery failed unexpectedly')
    } finally {
      this.inFlight--
      this.settle()
      // Claim again once half the room is free: one statement hands out many deliveries.
      if (this.saturated && this.inFlight <= this.options.concurrency / 2) this.tick()
    }
  }

  private decide(d: ClaimedDelivery, r: AttemptResult | null, attemptedAt: Date): DeliveryOutcome {
    const base = { orgId: d.org_id, id: d.id, webhookId: d.webhook_id, leaseToken: d.lease_token, attemptedAt, gone: false }
    if (r === null) {
      const error = d.enabled ? 'not sent: the roles of the key that set the webhook\'s URL do not see this event' : 'the webhook is disabled'
      return { ...base, status: 'failed', attempted: false, statusCode: null, error, nextAttemptAt: null }
    }
    const done = { ...base, attempted: true, statusCode: r.statusCode }
    if (r.statusCode !== null && r.statusCode >= 200 && r.statusCode < 300) return { ...done, status: 'succeeded', error: null, nextAttemptAt: null }
    if (r.statusCode === 410) {
      return { ...done, status: 'failed', error: 'the receiver answered 410 Gone: the webhook is disabled', nextAttemptAt: null, gone: true }
    }
    const error = r.error ?? `the receiver answered ${r.statusCode}`
    const attempts = d.attempts + 1
    const schedule = this.options.retrySchedule
    if (r.refused || attempts > schedule.length) return { ...done, status: 'failed', error, nextAttemptAt: null }
    const delay = r.retryAfterSeconds ?? jitter(schedule[attempts - 1]!)
    const nextAttemptAt = new Date(Date.now() + delay * 1000)
    return { ...done, status: 'pending', error, nextAttemptAt }
  }

  /**
   * A retry due within the next minute is claimed when it is due, not at the next poll: a 5 s
   * retry answered at the following 1 s poll came up to 1 s late, past the schedule's ±10 %
   * (CONTRACT §14). One timer per 100 ms of due times, so that 10,000 failing deliveries set at
   * most 600; later retries are claimed by the poll (1 s late at most on minutes or hours).
   */
  private wakeAt(ms: number): void {
    if (ms > WAKE_HORIZON_MS || !this.running) return
    const slot = Math.ceil((Date.now() + ms) / WAKE_SLOT_MS)
    if (this.wakeSlots.has(slot)) return
    this.wakeSlots.add(slot)
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      this.wakeSlots.delete(slot)
      this.tick()
    }, Math.max(0, slot * WAKE_SLOT_MS - Date.now()) + 5)
    timer.unref()
    this.timers.add(timer)
  }

  /** Outcomes are written a few milliseconds late, many in one statement. */
  private scheduleFlush(): void {
    if (this.flushTimer) return
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null
      void this.flush()
    }, FLUSH_DELAY_MS)
  }

  private flush(): Promise<void> {
    if (this.flushing) return this.flushing
    const run = async (): Promise<void> => {
      while (this.outcomes.length > 0) {
        const batch = this.outcomes.splice(0)
        // A batch that cannot be written is not retried here: its leases run out and the
        // deliveries are sent again (at least once).
        await recordOutcomes(this.options.db, batch).catch((err) => this.options.onError?.(err, 'recording webhook outcomes failed'))
        for (const outcome of batch) {
          if (outcome.nextAttemptAt) this.wakeAt(Math.max(0, outcome.nextAttemptAt.getTime() - Date.now()))
        }
      }
    }
    // Cleared in a later microtask, never before it is set (run() may finish synchronously).
    const flushing = run().finally(() => {
      if (this.flushing === flushing) this.flushing = null
    })
    this.flushing = flushing
    return flushing
  }

  /** One POST per Standard Webhooks; never throws. */
  private post(d: ClaimedDelivery): Promise<AttemptResult> {
    const { allowPrivate, timeoutMs } = this.options
    const failed = (error: string, refused = false): AttemptResult => ({ statusCode: null, retryAfterSeconds: null, error, refused })
    let url: URL
    try {
      url = new URL(d.url)
    } catch {
      return Promise.resolve(failed('the webhook URL is not valid', true))
    }
    if (!allowPrivate) {
      // A literal address connects without a lookup: checked here; host names in the lookup.
      const problem = literalAddressProblem(hostOf(url))
      if (problem) return Promise.resolve(failed(problem, true))
    }
    const timestamp = Math.floor(Date.now() / 1000)
    const secrets = d.previous_secret ? [d.secret, d.previous_secret] : [d.secret]
    const headers = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(d.payload)),
      'user-agent': 'kbis-webhooks',
      'webhook-id': d.event_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, d.event_id, timestamp, d.payload),
    }
    const secure = url.protocol === 'https:'
    const agents = this.agents
    if (!agents) return Promise.resolve(failed('the sender is stopping'))
    return new Promise<AttemptResult>((resolve) => {
      let settled = false
      const finish = (result: AttemptResult): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(result)
      }
      const request = (secure ? https : http).request(url, {
        method: 'POST',
        headers,
        agent: secure ? agents.https : agents.http,
        lookup: guardedLookup(allowPrivate) as never,
      }, (response) => {
        // The body is not needed: read and dropped, so the connection can be reused.
        response.resume()
        finish({ statusCode: response.statusCode ?? null, retryAfterSeconds: parseRetryAfter(response.headers['retry-after']), error: null, refused: false })
      })
      const timer = setTimeout(() => request.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT_WEBHOOK' })), timeoutMs)
      request.on('error', (err: NodeJS.ErrnoException) => finish(failed(describeError(err, timeoutMs), err instanceof RefusedAddressError)))
      request.end(d.payload)
    })
  }
}
