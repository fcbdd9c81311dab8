import type { FastifyInstance } from 'fastify'
import { webhookRoutes } from './routes.js'
import { WebhookWorker } from './worker.js'
import { enqueueDeliveries, hasEnabledWebhooks } from './enqueue.js'
import { deleteFinishedDeliveries } from './sql.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** This process's webhook sender (src/webhooks/worker.ts). */
    webhooks: WebhookWorker
  }
}

/**
 * The webhook sender of this process: started when the app is ready, stopped at shutdown (it
 * stops claiming, then lets the deliveries in flight finish before the store closes).
 */
export function createWebhookWorker(app: FastifyInstance): WebhookWorker {
  const { config } = app
  const worker = new WebhookWorker({
    db: app.db,
    retrySchedule: config.webhookRetrySchedule,
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: config.webhookTimeoutMs,
    pollMs: config.webhookPollMs,
    concurrency: config.webhookConcurrency,
    onError: (err, what) => app.log.error({ err }, what),
  })
  app.decorate('webhooks', worker)
  // Deliveries are queued in the relay's stamping transaction; once it commits, every sender on
  // the store (this one at once, others through the notification on PostgreSQL) claims them.
  let queued = false
  app.events.onStamped(async (tx, events) => {
    if ((await enqueueDeliveries(tx, events)) > 0) queued = true
  }, hasEnabledWebhooks)
  app.events.onCommitted(async () => {
    if (!queued) return
    queued = false
    await worker.notify()
  })
  // The delivery log is kept as long as the events: finished deliveries go with each retention round.
  app.events.onRetention(async (days) => {
    for (;;) {
      if ((await deleteFinishedDeliveries(app.db, days, 10_000)) < 10_000) return
    }
  })
  app.addHook('onReady', async () => worker.start())
  app.onShutdown(() => worker.stop())
  return worker
}

export { webhookRoutes }
