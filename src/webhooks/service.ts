import { AppError, Errors, type Issue } from '../core/errors.js'
import type { AuthContext } from '../core/auth/context.js'
import type { Db } from '../store/db.js'
import { isoSecond, isUuid, newId } from '../core/time.js'
import { offsetOf, pageMeta, type Page, type PageMeta } from '../core/pagination.js'
import { eventTypeIssues, TEST_EVENT_TYPE, WEBHOOK_LIMITS } from './patterns.js'
import { newWebhookSecret } from './signing.js'
import { webhookUrlIssue } from './ssrf.js'
import * as sql from './sql.js'
import { originOf } from '../outbox/write.js'
import { pushAll } from '../core/arrays.js'

/** What the webhook services need of a request (they never see `request` itself). */
export interface WebhookContext {
  db: Db
  auth: AuthContext
  /** KBIS_WEBHOOK_ALLOW_PRIVATE */
  allowPrivate: boolean
  /** Tells this process's sender (and, on PostgreSQL, the others) that a delivery is due now. */
  wake(): void
}

export interface WebhookRecord {
  id: string
  url: string
  description: string | null
  event_types: string[]
  enabled: boolean
  created_at: string
  updated_at: string
}

export interface DeliveryRecord {
  id: string
  event_id: string
  event_type: string
  status: 'pending' | 'succeeded' | 'failed'
  attempts: number
  last_attempt_at: string | null
  last_status_code: number | null
  last_error: string | null
  next_attempt_at: string | null
}

export interface WebhookInput {
  url: string
  description?: string | null
  event_types: string[]
  enabled?: boolean
}

export type WebhookPatch = Partial<WebhookInput>

export interface PageOf<T> {
  data: T[]
  page: PageMeta
}

/** Both secrets sign for a day after a rotation (CONTRACT §14). */
export const ROTATION_OVERLAP_SECONDS = 24 * 3600

function toRecord(row: sql.WebhookRow): WebhookRecord {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    enabled: row.enabled,
    created_at: isoSecond(row.created_at)!,
    updated_at: isoSecond(row.updated_at)!,
  }
}

export function toDeliveryRecord(row: sql.DeliveryRow): DeliveryRecord {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_attempt_at: isoSecond(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    // A delivery that will not be attempted again has no next attempt.
    next_attempt_at: row.status === 'pending' ? isoSecond(row.next_attempt_at) : null,
  }
}

const notFound = (id: string): AppError => new AppError(Errors.NOT_FOUND, `webhook ${id} not found`)

async function load(ctx: WebhookContext, id: string): Promise<sql.WebhookRow> {
  const row = isUuid(id) ? await sql.selectWebhook(ctx.db, ctx.auth.orgId, id) : null
  if (!row) throw notFound(id)
  return row
}

/** Every problem of the body at once: the URL (scheme, refused address) and unknown event types. */
async function validate(ctx: WebhookContext, input: WebhookPatch): Promise<void> {
  const issues: Issue[] = []
  // The API's schema refuses these first; the console's forms reach only this.
  const tooLong = (name: 'url' | 'description', value: string | null | undefined): boolean => {
    const over = !!value && [...value].length > WEBHOOK_LIMITS[name]
    if (over) issues.push({ detail: `${name} must be at most ${WEBHOOK_LIMITS[name]} characters`, pointer: `/${name}` })
    return over
  }
  const urlTooLong = tooLong('url', input.url)
  tooLong('description', input.description)
  if (input.url !== undefined && !urlTooLong) {
    const issue = await webhookUrlIssue(input.url, ctx.allowPrivate)
    if (issue) issues.push(issue)
  }
  if (input.event_types !== undefined) pushAll(issues, eventTypeIssues(input.event_types))
  if (issues.length > 0) throw new AppError(Errors.VALIDATION_FAILED, issues)
}

export async function listWebhooks(ctx: WebhookContext, page: Page): Promise<PageOf<WebhookRecord>> {
  const result = await sql.selectWebhookPage(ctx.db, ctx.auth.orgId, page.size, offsetOf(page), page.count === 'exact')
  return { data: result.rows.map(toRecord), page: pageMeta(page, result) }
}

export async function getWebhook(ctx: WebhookContext, id: string): Promise<WebhookRecord> {
  return toRecord(await load(ctx, id))
}

/** The new webhook and its secret, which no later answer shows again. */
export async function createWebhook(ctx: WebhookContext, input: WebhookInput): Promise<WebhookRecord & { secret: string }> {
  await validate(ctx, input)
  const secret = newWebhookSecret()
  const row = await sql.insertWebhook(ctx.db, ctx.auth.orgId, {
    id: newId(),
    url: input.url,
    description: input.description ?? null,
    event_types: input.event_types,
    enabled: input.enabled ?? true,
    secret,
    viewer: ctx.auth,
  }, WEBHOOK_LIMITS.perOrganization)
  if (!row) {
    throw new AppError(Errors.VALIDATION_FAILED, [{ detail: `an organization has at most ${WEBHOOK_LIMITS.perOrganization} webhooks; delete one to add another`, pointer: '' }])
  }
  // Senders idle while the store has no webhook: from now on they poll.
  ctx.wake()
  return { ...toRecord(row), secret }
}

export async function updateWebhook(ctx: WebhookContext, id: string, patch: WebhookPatch): Promise<WebhookRecord> {
  await load(ctx, id)
  await validate(ctx, patch)
  const row = await sql.updateWebhook(ctx.db, ctx.auth.orgId, id, patch, ctx.auth)
  if (!row) throw notFound(id)
  return toRecord(row)
}

export async function deleteWebhook(ctx: WebhookContext, id: string): Promise<void> {
  if (!isUuid(id) || !(await sql.deleteWebhook(ctx.db, ctx.auth.orgId, id))) throw notFound(id)
}

/** A new secret; the previous one keeps signing (a second signature) for 24 hours. */
export async function rotateSecret(ctx: WebhookContext, id: string): Promise<WebhookRecord & { secret: string }> {
  await load(ctx, id)
  const secret = newWebhookSecret()
  const row = await sql.rotateWebhookSecret(ctx.db, ctx.auth.orgId, id, secret, ROTATION_OVERLAP_SECONDS)
  if (!row) throw notFound(id)
  return { ...toRecord(row), secret }
}

export async function listDeliveries(ctx: WebhookContext, id: string, page: Page): Promise<PageOf<DeliveryRecord>> {
  await load(ctx, id)
  const result = await sql.selectDeliveryPage(ctx.db, ctx.auth.orgId, id, page.size, offsetOf(page), page.count === 'exact')
  return { data: result.rows.map(toDeliveryRecord), page: pageMeta(page, result) }
}

async function loadDelivery(ctx: WebhookContext, webhookId: string, id: string): Promise<DeliveryRecord> {
  const row = isUuid(id) ? await sql.selectDelivery(ctx.db, ctx.auth.orgId, webhookId, id) : null
  if (!row) throw new AppError(Errors.NOT_FOUND, `delivery ${id} of webhook ${webhookId} not found`)
  return toDeliveryRecord(row)
}

/** Queues a delivery again, due now (any status); the answer is the delivery as queued. */
export async function retryDelivery(ctx: WebhookContext, id: string, deliveryId: string): Promise<DeliveryRecord> {
  await load(ctx, id)
  if (!isUuid(deliveryId) || !(await sql.requeueDelivery(ctx.db, ctx.auth.orgId, id, deliveryId))) {
    throw new AppError(Errors.NOT_FOUND, `delivery ${deliveryId} of webhook ${id} not found`)
  }
  const queued = await loadDelivery(ctx, id, deliveryId)
  ctx.wake()
  return queued
}

/**
 * A `webhook.test` event for this webhook only, in the CloudEvents shape of every event (without a
 * `sequence`: it is not part of the feed). `data.object` is the webhook record.
 */
export async function sendTestEvent(ctx: WebhookContext, id: string, requestId: string): Promise<DeliveryRecord> {
  const webhook = toRecord(await load(ctx, id))
  const eventId = newId()
  const event = {
    specversion: '1.0',
    id: eventId,
    type: TEST_EVENT_TYPE,
    source: `/organizations/${ctx.auth.orgKey}`,
    subject: `webhooks/${id}`,
    time: isoSecond(new Date())!,
    datacontenttype: 'application/json',
    requestid: requestId,
    data: { object: webhook, actor: originOf(ctx).actor },
  }
  const deliveryId = newId()
  // A webhook deleted meanwhile (a DELETE racing this request) is not found, as it would be a moment later.
  if (!(await sql.insertDelivery(ctx.db, ctx.auth.orgId, { id: deliveryId, webhookId: id, eventId, eventType: TEST_EVENT_TYPE, payload: JSON.stringify(event) }))) throw notFound(id)
  const queued = await loadDelivery(ctx, id, deliveryId)
  ctx.wake()
  return queued
}
