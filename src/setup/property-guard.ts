import { refuse, type ApplyContext } from './context.js'
import { count, same } from './diff.js'
import { expectation } from './fit.js'
import { countLiveDuplicates, countLiveNotFitting, countLiveWithValue, countLiveWithoutValue } from './guards.js'
import type { PropertySpec } from './types.js'

/** The fields that decide which values are valid (name, description, currency do not). */
function validityChanged(before: PropertySpec, after: PropertySpec): boolean {
  return (['type', 'options', 'min', 'max'] as const).some((f) => !same(before[f], after[f]))
}

/**
 * What the refused change was. Within one type only options (select, multi_select) or min/max
 * (the number types) decide validity, so a change of options is never called one of bounds: a
 * live value can be outside options that lose none (an asset restored from the archive after its
 * option was removed).
 */
function action(label: string, before: PropertySpec | null, after: PropertySpec): string {
  if (!before) return `cannot add ${label}`
  if (before.type !== after.type) return `cannot change the type of ${label} from ${before.type} to ${after.type}`
  if (same(before.options, after.options)) return `cannot change the bounds of ${label}`
  const removed = (before.options ?? []).filter((o) => !(after.options ?? []).includes(o))
  if (removed.length > 0) return `cannot remove option${removed.length > 1 ? 's' : ''} ${removed.join(', ')} from ${label}`
  return `cannot change the options of ${label}`
}

/**
 * Refuses a new or changed property definition that live assets of the type contradict: values
 * of another type, removed options still used, values out of the new bounds, missing values of a
 * property that becomes required, and duplicates or forbidden characters in a new unique key.
 */
export async function guardProperty(ctx: ApplyContext, type: string, before: PropertySpec | null, after: PropertySpec): Promise<void> {
  const label = `property ${type}.${after.key}`
  if (!before || validityChanged(before, after)) {
    const bad = await countLiveNotFitting(ctx.tx, ctx.orgId, type, after)
    if (bad > 0) refuse(ctx, `${action(label, before, after)}: ${count(bad, 'live asset')} a value that is not ${expectation(after)}`)
  }
  if (after.required && !before?.required) {
    const missing = await countLiveWithoutValue(ctx.tx, ctx.orgId, type, after.key)
    const what = before ? `cannot make ${label} required` : `cannot add required ${label}`
    if (missing > 0) refuse(ctx, `${what}: ${count(missing, 'live asset')} no value`)
  }
  if (after.type === 'unique_key' && before?.type !== 'unique_key') {
    const dup = await countLiveDuplicates(ctx.tx, ctx.orgId, type, after.key)
    if (dup.assets > 0) {
      const shared = dup.values === 1 ? '1 value' : `${dup.values} values`
      refuse(ctx, `cannot make ${label} the unique key of asset type ${type}: ${dup.assets} live assets share ${shared}`)
    }
  }
}

/** Refuses removing a property that live assets still have a value for. */
export async function guardPropertyRemoval(ctx: ApplyContext, type: string, key: string): Promise<void> {
  const used = await countLiveWithValue(ctx.tx, ctx.orgId, type, key)
  if (used > 0) refuse(ctx, `cannot remove property ${type}.${key}: ${count(used, 'live asset')} a value`)
}
