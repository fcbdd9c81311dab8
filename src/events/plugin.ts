import type { FastifyInstance } from 'fastify'
import type { Config } from '../core/config.js'
import { BACKGROUND_SQL, type Db } from '../store/db.js'
import { DATA_CHANGED_CHANNEL } from '../counts/cache.js'
import { EventRelay } from './relay.js'

/**
 * The event relay of this process: polls for unstamped events, is woken when this process
 * commits a transaction that wrote events (eventsWritten in outbox/write.ts), stops (stamping
 * and publishing what is left) when the app closes.
 */
export function registerEvents(app: FastifyInstance, db: Db, config: Config): void {
  // Past KBIS_SHUTDOWN_TIMEOUT the relay's own statements are cut off like any other: expected, so
  // a warning, not an error.
  const failed = (err: unknown, message: string): void => app.lifecycle?.cuttingOff
    ? app.log.warn({ err }, `${message} (cut off by the shutdown timeout)`)
    : app.log.error({ err }, message)
  const relay = new EventRelay(db, {
    // PGlite belongs to this process: its writes wake the relay, so a slow safety-net poll is
    // enough (every poll runs on the event loop's thread there).
    intervalMs: db.kind === 'pglite' ? Math.max(config.eventRelayIntervalMs, 5000) : config.eventRelayIntervalMs,
    retentionDays: config.eventRetentionDays,
    publishes: config.natsUrl !== undefined,
    onError: (err) => failed(err, 'event relay failed'),
    // The first of a run of identical failures with its stack; the next ones a line each.
    onRoundFailed: (err, retry) => retry.repeated
      ? app.log.warn(`event relay still failing (${retry.failures} attempts: ${(err as Error).message}); retrying in ${retry.retryInMs} ms`)
      : failed(err, `event relay failed; retrying in ${retry.retryInMs} ms`),
  })
  app.decorate('events', relay)
  // Every asset and relationship write emits events: the organizations of a stamped batch tell
  // every process (counts/cache.ts) that their data changed. Only PostgreSQL has other processes.
  if (db.kind === 'postgres') {
    relay.onCommitted(async (_events, orgIds) => {
      // A payload holds at most 8,000 bytes: 100 ids of 36 characters per notification.
      for (let i = 0; i < orgIds.length; i += 100) {
        await db.query(`${BACKGROUND_SQL}SELECT pg_notify($1, $2)`, [DATA_CHANGED_CHANNEL, orgIds.slice(i, i + 100).join(',')])
      }
    })
  }
  app.addHook('onReady', async () => {
    // The store's way of stamping (PGlite: positions drawn when events are written), before any
    // request writes one.
    await relay.prepare()
    if (config.natsUrl) {
      const { attachNats } = await import('./nats.js')
      const options = {
        url: config.natsUrl,
        stream: config.natsStream,
        onError: (err: unknown, repeated: boolean) => repeated
          ? app.log.warn(`NATS publication still failing (${(err as Error | undefined)?.message ?? String(err)}); events stay pending, next attempt in 5 s`)
          : app.log.error({ err }, 'NATS publication failed; events stay pending and are published again by a sweep every 5 s'),
        onResumed: () => app.log.info('NATS publication resumed'),
        onOversized: (eventId: string, bytes: number, max: number) =>
          app.log.warn({ event_id: eventId, bytes, max_payload: max }, 'event larger than the NATS server\'s max_payload: published without its data (dataomitted: true); GET /events has it whole'),
      }
      // NATS down at start does not stop the API: events stay pending (stamped, not published)
      // until a connection succeeds, here or in another process. No attempt starts once the app
      // is closing, and one under way is given up (its connection closed, whenever it is made):
      // an attempt that went on after the close created the stream again and left its connection
      // open, and waiting for one kept the close waiting for a silent NATS's time-out.
      let attempts = 0
      const attach = (): void => {
        if (closed) return
        nats.attaching = attachNats(relay, db, { ...options, signal: giveUp.signal }).then((sink) => {
          nats.sink = sink
          if (attempts > 0) app.log.info(`NATS reached after ${attempts} failed attempt${attempts === 1 ? '' : 's'}; pending events are being published`)
        }, (err: unknown) => {
          if (giveUp.signal.aborted) return
          const what = err instanceof Error && err.name === 'NatsStreamError' ? err.message : 'NATS unreachable'
          // The first failure whole, the next ones of the same outage as one line each.
          if (attempts++ === 0) app.log.error({ err }, `${what}; retrying in 5 s`)
          else app.log.warn(`${what} (${attempts} attempts: ${(err as Error | undefined)?.message ?? String(err)}); retrying in 5 s`)
          setTimeout(attach, 5000).unref()
        })
      }
      attach()
    }
    relay.start()
  })
  let closed = false
  const giveUp = new AbortController()
  const nats: { attaching: Promise<void> | null; sink: { close(): Promise<void> } | null } = { attaching: null, sink: null }
  app.addHook('onClose', async () => {
    closed = true
    giveUp.abort()
    await nats.attaching
    await relay.stop()
    await nats.sink?.close()
  })
}
