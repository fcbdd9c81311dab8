import { AppError, Errors } from '../core/errors.js'
import type { RequestContext } from '../core/context.js'
import type { Tx } from '../store/db.js'
import type { AssetRow } from '../assets/mapper.js'

export interface EmbeddedSync {
  asset: AssetRow
  relationships: unknown
  /** JSON pointer of the `relationships` member in the request body. */
  pointer: string
}

/** Replaces each submitted (direction, type) pair of each asset by exactly the submitted set. */
export async function syncEmbeddedRelationships(_tx: Tx, _ctx: RequestContext, items: EmbeddedSync[]): Promise<void> {
  // Not available yet: refused explicitly (422) rather than silently ignored.
  throw new AppError(Errors.VALIDATION_FAILED, [{ detail: 'embedded relationships are not available yet', pointer: items[0]?.pointer ?? '/relationships' }])
}
