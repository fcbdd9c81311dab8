import type { Queryable } from '../store/db.js'
import type { CloudEvent } from '../outbox/cloud-event.js'
import { insertMatchingDeliveries, selectEnabledWebhooks } from './sql.js'
import { matchesEventType } from './patterns.js'

/**
 * The relay's `onStamped` hook: runs inside the stamping transaction, so the deliveries of the
 * events just stamped commit with their positions (a crash in between loses nothing and queues
 * nothing twice). One INSERT … SELECT for the whole batch matches each event to its
 * organization's enabled webhooks by pattern; the payload is the event's JSON text, the bytes
 * every attempt sends and signs. A cheap look at the organizations' webhook patterns comes first,
 * so that a batch no webhook wants (the common case) costs no JSON and no insert. Returns how
 * many deliveries were queued.
 */
export async function enqueueDeliveries(tx: Queryable, events: readonly { orgId: string; event: CloudEvent }[]): Promise<number> {
  if (events.length === 0) return 0
  const webhooks = await selectEnabledWebhooks(tx, [...new Set(events.map((e) => e.orgId))])
  if (webhooks.size === 0) return 0
  const wanted = events.filter(({ orgId, event }) => matchesEventType(webhooks.get(orgId)?.patterns ?? [], event.type))
  const scoped = wanted.some(({ orgId }) => webhooks.get(orgId)?.scoped === true)
  return insertMatchingDeliveries(tx, wanted.map(({ orgId, event }) => ({ orgId, id: event.id, type: event.type, payload: JSON.stringify(event) })), scoped)
}

/**
 * Whether any of these organizations has an enabled webhook: the relay asks before it stamps, and
 * stamps ids only when none has (then `enqueueDeliveries` gets no events and queues nothing).
 */
export async function hasEnabledWebhooks(tx: Queryable, orgIds: readonly string[]): Promise<boolean> {
  return (await selectEnabledWebhooks(tx, orgIds)).size > 0
}
