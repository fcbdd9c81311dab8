import type { RequestContext } from '../request/context.js'
import { readHistory } from '../events/service.js'
import type { CloudEvent } from '../outbox/cloud-event.js'

export interface HistoryEntry {
  time: string
  type: string
  summary: string
  actor: string
}

const show = (value: unknown): string => (value === null || value === undefined ? '∅' : Array.isArray(value) ? value.join(', ') : typeof value === 'object' ? JSON.stringify(value) : String(value))

function summary(event: CloudEvent, assetId: string): string {
  const o = event.data.object
  if (event.type.startsWith('relationship.')) {
    const outgoing = o.source_asset_id === assetId
    return `${String(o.relationship_type_key)} ${outgoing ? '→' : '←'} ${String(outgoing ? o.target_asset_id : o.source_asset_id)}`
  }
  if (event.data.changes) return Object.entries(event.data.changes).map(([field, c]) => `${field}: ${show(c.from)} → ${show(c.to)}`).join('; ')
  return ''
}

/** An asset's latest events (CONTRACT §13, the same service as GET /assets/{id}/history), newest first. */
export async function assetHistory(ctx: RequestContext, id: string): Promise<HistoryEntry[]> {
  const page = await readHistory(ctx, id, { number: 1, size: 50 })
  return page.data.map((e) => ({
    time: e.time,
    type: e.type,
    summary: summary(e, id),
    actor: e.data.actor.api_key_id ? `API key ${e.data.actor.api_key_id.slice(0, 8)}…` : e.data.actor.user_id ? 'console user' : 'operator',
  }))
}
