import type { Queryable } from '../store/db.js'
import type { CloudEvent } from '../events/cloud-event.js'
import { insertMatchingDeliveries } from './sql.js'

/**
 * The relay's `onStamped` hook: runs inside the stamping transaction, so the deliveries of the
 * events just stamped commit with their positions (a crash in between loses nothing and queues
 * nothing twice). One INSERT … SELECT for the whole batch, matching each event to its
 * organization's enabled webhooks by pattern. The payload is the event's JSON text, the bytes
 * every attempt sends and signs. Returns how many deliveries were queued.
 */
export async function enqueueDeliveries(tx: Queryable, events: readonly { orgId: string; event: CloudEvent }[]): Promise<number> {
  return insertMatchingDeliveries(tx, events.map(({ orgId, event }) => ({ orgId, id: event.id, type: event.type, payload: JSON.stringify(event) })))
}
