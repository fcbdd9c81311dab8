import type { FastifyInstance, FastifyRequest } from 'fastify'
import * as service from '../webhooks/service.js'
import { AppError, Errors } from '../core/errors.js'
import { backWithRefusal, field, redirectWith, typedForm } from './plugin.js'
import type { TypedForm } from './sql.js'
import { requestStore } from '../core/cut-off.js'

const SETTINGS = '/console/developer-settings'

/** The webhook services' context for a console user (CONTRACT §15: webhooks are Admin only, as in the API). */
export function webhookContext(app: FastifyInstance, request: FastifyRequest): service.WebhookContext {
  const auth = request.console!.ctx.auth
  if (auth.permission !== 'Admin') throw new AppError(Errors.FORBIDDEN, 'Only administrators and owners manage webhooks.')
  return {
    db: requestStore(request, app.db),
    auth,
    allowPrivate: app.config.webhookAllowPrivate,
    wake: () => void app.webhooks.notify().catch((err) => app.log.warn({ err }, 'could not notify the webhook senders')),
  }
}

/** Webhooks with their latest deliveries, for the settings page (Admins only; null otherwise). */
export async function webhooksForPage(app: FastifyInstance, request: FastifyRequest): Promise<(service.WebhookRecord & { deliveries: service.DeliveryRecord[] })[] | null> {
  if (request.console!.ctx.auth.permission !== 'Admin') return null
  const ctx = webhookContext(app, request)
  const hooks = await service.listWebhooks(ctx, { number: 1, size: 100 })
  return Promise.all(hooks.data.map(async (w) => ({ ...w, deliveries: (await service.listDeliveries(ctx, w.id, { number: 1, size: 10 })).data })))
}

/** /console/developer-settings/webhooks…: the API's webhook service with the user's context. */
export async function webhookPages(app: FastifyInstance): Promise<void> {
  // A refusal goes back to the form with its message and what was typed into it.
  const fail = (request: FastifyRequest, reply: Parameters<typeof redirectWith>[2], err: unknown, back: string, form: TypedForm) =>
    backWithRefusal(app, request, reply, err, [Errors.VALIDATION_FAILED], back, form)
  const id = (request: FastifyRequest) => (request.params as { id: string }).id

  app.post('/developer-settings/webhooks', async (request, reply) => {
    const ctx = webhookContext(app, request)
    const events = field(request, 'event_types').split(/[\s,]+/).filter(Boolean)
    try {
      const hook = await service.createWebhook(ctx, {
        url: field(request, 'url').trim(),
        description: field(request, 'description').trim() || null,
        event_types: events.length > 0 ? events : ['*'],
      })
      return redirectWith(app, request, reply, `${SETTINGS}#webhooks-h`, {
        notice: `Added the webhook for ${hook.url}. Copy its signing secret now: it is shown only this once.`,
        secrets: [{ of: `the webhook ${hook.url}`, value: hook.secret, section: 'webhooks' }],
      })
    } catch (err) {
      return fail(request, reply, err, `${SETTINGS}?new=webhook`, typedForm(request, 'webhook:new', { one: ['url', 'event_types', 'description'] }))
    }
  })

  app.post('/developer-settings/webhooks/:id/test', async (request, reply) => {
    await service.sendTestEvent(webhookContext(app, request), id(request), request.id)
    return redirectWith(app, request, reply, `${SETTINGS}#webhooks-h`, { notice: 'Sent a test event: its delivery is listed below.' })
  })

  app.post('/developer-settings/webhooks/:id/deliveries/:delivery/retry', async (request, reply) => {
    await service.retryDelivery(webhookContext(app, request), id(request), (request.params as { delivery: string }).delivery)
    return redirectWith(app, request, reply, `${SETTINGS}#webhooks-h`, { notice: 'Queued the delivery again.' })
  })

  app.post('/developer-settings/webhooks/:id/delete', async (request, reply) => {
    await service.deleteWebhook(webhookContext(app, request), id(request))
    return redirectWith(app, request, reply, `${SETTINGS}#webhooks-h`, { notice: 'Deleted the webhook.' })
  })
}
