import type { RequestContext } from '../core/context.js'

export interface HistoryEntry {
  time: string
  type: string
  summary: string
}

/**
 * An asset's history (CONTRACT §13). The events feed is built on its own branch; until it is
 * merged, null: the page says that history is not recorded yet.
 */
export async function assetHistory(_ctx: RequestContext, _id: string): Promise<HistoryEntry[] | null> {
  return null
}
