import type { Tx } from '../store/db.js'
import { SetupError, withSource, type SetupFile } from './types.js'
import type { OrgState } from './state.js'
import { pushAll } from '../core/arrays.js'

/** What every step of one apply shares. Steps append their change lines to `changes`. */
export interface ApplyContext {
  tx: Tx
  orgId: string
  orgKey: string
  setup: SetupFile
  /** The store before this apply (read once, after locking the organization). */
  state: OrgState
  changes: string[]
  /** Change lines about asset types, property definitions and relationship types. */
  metamodelChanges: number
}

/** Stops the apply (the transaction rolls back): one line naming the file and the organization. */
export function refuse(ctx: ApplyContext, message: string): never {
  throw new SetupError(withSource(ctx.setup.source, `organization ${ctx.orgKey}: ${message}`))
}

export function record(ctx: ApplyContext, lines: string[], metamodel = false): void {
  pushAll(ctx.changes, lines)
  if (metamodel) ctx.metamodelChanges += lines.length
}
