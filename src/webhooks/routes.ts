import type { FastifyInstance, FastifyRequest } from 'fastify'
import { locationOf, pageFromQuery, pageLinks } from '../core/pagination.js'
import { requirePermission } from '../core/auth/permissions.js'
import { deliveryParams, idParams, listQuery, webhookCreateBody, webhookPatchBody, webhookResponses } from './schemas.js'
import * as service from './service.js'
import type { WebhookWorker } from './worker.js'
import { requestStore } from '../core/cut-off.js'

const params = (request: FastifyRequest) => request.params as { id: string; delivery_id?: string }

function listEnvelope<T>(request: FastifyRequest, result: service.PageOf<T>) {
  return { data: result.data, meta: { page: result.page }, links: pageLinks(request, result.page) }
}

/** /webhooks (CONTRACT §14), Admin keys only. */
export function webhookRoutes(worker: WebhookWorker) {
  return async (app: FastifyInstance): Promise<void> => {
    const tags = ['webhooks']
    const onlyAdmin = requirePermission('Admin')
    const contextOf = (request: FastifyRequest): service.WebhookContext => ({
      db: requestStore(request, app.db),
      auth: request.auth,
      allowPrivate: app.config.webhookAllowPrivate,
      wake: () => void worker.notify().catch((err) => app.log.warn({ err }, 'could not notify the webhook senders')),
    })
    const pageOf = (request: FastifyRequest) => pageFromQuery(request.query as Record<string, unknown>)

    app.get('/webhooks', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'List webhooks', querystring: listQuery, response: webhookResponses.list },
    }, async (request) => listEnvelope(request, await service.listWebhooks(contextOf(request), pageOf(request))))

    app.post('/webhooks', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Create a webhook; its signing secret is in this response only', body: webhookCreateBody, response: webhookResponses.created },
    }, async (request, reply) => {
      const data = await service.createWebhook(contextOf(request), request.body as service.WebhookInput)
      return reply.code(201).header('Location', locationOf(request, 'webhooks', data.id)).send({ data })
    })

    app.get('/webhooks/:id', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Read a webhook (never its secret)', params: idParams, response: webhookResponses.one },
    }, async (request) => ({ data: await service.getWebhook(contextOf(request), params(request).id) }))

    app.patch('/webhooks/:id', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Change url, description, event_types or enabled', params: idParams, body: webhookPatchBody, response: webhookResponses.patched },
    }, async (request) => ({ data: await service.updateWebhook(contextOf(request), params(request).id, request.body as service.WebhookPatch) }))

    app.delete('/webhooks/:id', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Delete a webhook and its delivery log', params: idParams, response: webhookResponses.deleted },
    }, async (request, reply) => {
      await service.deleteWebhook(contextOf(request), params(request).id)
      return reply.code(204).send()
    })

    app.post('/webhooks/:id/rotate-secret', {
      preValidation: onlyAdmin,
      schema: {
        tags, summary: 'A new signing secret; for 24 hours both secrets sign (two space-separated signatures)',
        params: idParams, response: webhookResponses.rotated,
      },
    }, async (request) => ({ data: await service.rotateSecret(contextOf(request), params(request).id) }))

    app.get('/webhooks/:id/deliveries', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'The delivery log of a webhook, newest first', params: idParams, querystring: listQuery, response: webhookResponses.deliveries },
    }, async (request) => listEnvelope(request, await service.listDeliveries(contextOf(request), params(request).id, pageOf(request))))

    app.post('/webhooks/:id/deliveries/:delivery_id/retry', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Queue a delivery again, due now', params: deliveryParams, response: webhookResponses.queued },
    }, async (request, reply) => {
      const { id, delivery_id } = params(request)
      return reply.code(202).send({ data: await service.retryDelivery(contextOf(request), id, delivery_id!) })
    })

    app.post('/webhooks/:id/test', {
      preValidation: onlyAdmin,
      schema: { tags, summary: 'Send a webhook.test event to this webhook only', params: idParams, response: webhookResponses.queued },
    }, async (request, reply) => reply.code(202).send({ data: await service.sendTestEvent(contextOf(request), params(request).id, request.id) }))
  }
}
