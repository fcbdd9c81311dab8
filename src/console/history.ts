import type { RequestContext } from '../request/context.js'
import { readHistory } from '../events/service.js'
import { searchAssets } from '../search/assets.js'
import type { CloudEvent } from '../outbox/cloud-event.js'

export interface HistoryEntry {
  time: string
  type: string
  summary: string
  /** The other end of a relationship event: a link to it, named when the user can see it live. */
  related?: { id: string; label: string }
  actor: string
}

const show = (value: unknown): string => (value === null || value === undefined ? '∅' : Array.isArray(value) ? value.join(', ') : typeof value === 'object' ? JSON.stringify(value) : String(value))

/** The other end of a relationship event, seen from the asset whose history this is. */
function otherEnd(event: CloudEvent, assetId: string): string | null {
  if (!event.type.startsWith('relationship.')) return null
  const o = event.data.object
  return String(o.source_asset_id === assetId ? o.target_asset_id : o.source_asset_id)
}

function summary(event: CloudEvent, assetId: string): string {
  const o = event.data.object
  if (event.type.startsWith('relationship.')) return `${String(o.relationship_type_key)} ${o.source_asset_id === assetId ? '→' : '←'}`
  if (event.data.changes) return Object.entries(event.data.changes).map(([field, c]) => `${field}: ${show(c.from)} → ${show(c.to)}`).join('; ')
  return ''
}

/**
 * Names of the live assets among `ids` that the user may see: one search with the user's own
 * scope (an asset they may not see, or an archived one, stays an id).
 */
async function assetNames(ctx: RequestContext, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map()
  const found = await searchAssets(ctx, { filter: { field: 'id', operator: 'in', value: ids }, page: { number: 1, size: ids.length } })
  return new Map(found.data.map((a) => [a.id, a.name]))
}

/** An asset's latest events (CONTRACT §13, the same service as GET /assets/{id}/history), newest first. */
export async function assetHistory(ctx: RequestContext, id: string): Promise<HistoryEntry[]> {
  const page = await readHistory(ctx, id, { number: 1, size: 50 })
  const events = page.json.map((text) => JSON.parse(text) as CloudEvent)
  const names = await assetNames(ctx, [...new Set(events.flatMap((e) => otherEnd(e, id) ?? []))])
  return events.map((e) => {
    const other = otherEnd(e, id)
    return {
      time: e.time,
      type: e.type,
      summary: summary(e, id),
      ...(other !== null ? { related: { id: other, label: names.get(other) ?? other } } : {}),
      actor: e.data.actor.api_key_id ? `API key ${e.data.actor.api_key_id.slice(0, 8)}…` : e.data.actor.user_id ? 'console user' : 'operator',
    }
  })
}
