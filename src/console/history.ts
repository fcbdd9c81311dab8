import type { RequestContext } from '../request/context.js'
import { readHistory } from '../events/service.js'
import { searchAssets } from '../search/assets.js'
import type { CloudEvent } from '../outbox/cloud-event.js'
import type { PageMeta } from '../core/pagination.js'
import { TOKEN_PREFIX } from '../core/auth/tokens.js'
import { selectActorNames, type ActorNames } from './sql.js'
import { selectArchivedAssets } from '../assets/sql.js'
import { hasLevel } from '../access/scope.js'

export interface HistoryEntry {
  time: string
  type: string
  summary: string
  /**
   * The other end of a relationship event, named when the user can see it: a link to its page, or,
   * archived, to it in the archived assets; by its id otherwise (hidden, or deleted).
   */
  /** The relationship's other end: a link to its page, or its id alone (deleted since, or not visible to the user). */
  related?: { href: string | null; label: string }
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
  // A move seen without what it moved from (events/sql.ts: the user could not see it there): the new values alone.
  if (event.data.changes) return Object.entries(event.data.changes).map(([field, c]) => ('from' in c ? `${field}: ${show(c.from)} → ${show(c.to)}` : `${field}: → ${show(c.to)}`)).join('; ')
  return ''
}

/**
 * Where the console shows the assets among `ids` that the user may see: a live one's page (one
 * search with the user's own scope), an archived one in the archived assets, by its name and
 * type; one they may not see, or deleted, is left out (it stays an id).
 */
async function assetLinks(ctx: RequestContext, ids: readonly string[]): Promise<Map<string, { href: string; label: string }>> {
  if (ids.length === 0) return new Map()
  const found = await searchAssets(ctx, { filter: { field: 'id', operator: 'in', value: ids }, page: { number: 1, size: ids.length } })
  const links = new Map(found.data.map((a) => [a.id, { href: `/console/assets/${a.id}`, label: a.name }]))
  const rest = ids.filter((id) => !links.has(id))
  if (rest.length > 0) {
    for (const a of await selectArchivedAssets(ctx.db, ctx.auth.orgId, rest)) {
      if (!hasLevel(ctx.auth, a, 'view')) continue
      links.set(a.id, { href: `/console/archived?${new URLSearchParams({ name: a.name, type: a.asset_type_key }).toString()}`, label: `${a.name} (archived)` })
    }
  }
  return links
}

/** The last 12 hex digits of a UUID: its random part (a UUIDv7 begins with its creation time, which keys made together share). */
const shortId = (id: string): string => `…${id.slice(-12)}`

/**
 * Who acted, as the signed-in user may know them: an Admin (or Owner) sees every key's name and
 * prefix and every user's email, as Developer settings and GET /users show them; others see the
 * names of their own keys and themselves, and the rest by id (events carry the ids anyway).
 * A key deleted since is named by its id.
 */
function actorLabel(ctx: RequestContext, event: CloudEvent, names: ActorNames): string {
  const { api_key_id: keyId, user_id: userId } = event.data.actor
  const admin = ctx.auth.permission === 'Admin'
  if (keyId) {
    const key = names.keys.get(keyId)
    if (key && (admin || key.owner_user_id === ctx.auth.userId)) return `API key ${key.name} (${TOKEN_PREFIX}${key.secret_prefix})`
    return `API key ${shortId(keyId)}`
  }
  if (userId) {
    if (userId === ctx.auth.userId) return `you (${names.users.get(userId) ?? 'console'})`
    const email = names.users.get(userId)
    return admin && email ? email : `user ${shortId(userId)}`
  }
  return 'operator (kbis CLI)'
}

export const HISTORY_PAGE_SIZE = 50

/** A page of an asset's events (CONTRACT §13, the same service as GET /assets/{id}/history), newest first. */
export async function assetHistory(ctx: RequestContext, id: string, number = 1): Promise<{ entries: HistoryEntry[]; page: PageMeta }> {
  const page = await readHistory(ctx, id, { number, size: HISTORY_PAGE_SIZE })
  const events = page.json.map((text) => JSON.parse(text) as CloudEvent)
  const [names, actors] = await Promise.all([
    assetLinks(ctx, [...new Set(events.flatMap((e) => otherEnd(e, id) ?? []))]),
    selectActorNames(ctx.db, ctx.auth.orgId,
      [...new Set(events.flatMap((e) => e.data.actor.api_key_id ?? []))],
      [...new Set(events.flatMap((e) => e.data.actor.user_id ?? []))]),
  ])
  const entries = events.map((e) => {
    const other = otherEnd(e, id)
    return {
      time: e.time,
      type: e.type,
      summary: summary(e, id),
      ...(other !== null ? { related: names.get(other) ?? { href: null, label: other } } : {}),
      actor: actorLabel(ctx, e, actors),
    }
  })
  return { entries, page: page.page }
}
