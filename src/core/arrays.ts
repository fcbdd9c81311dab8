/**
 * `target.push(...items)` for any number of items: a spread passes every item as an argument,
 * and 100,000 or so of them overflow the stack (a RangeError: one bulk item with 400,000 unknown
 * properties answered 500).
 */
export function pushAll<T>(target: T[], items: Iterable<T>): T[] {
  for (const item of items) target.push(item)
  return target
}
