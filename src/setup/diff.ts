/** Change lines of the apply report: `<label>: <field> <before> → <after>`. */

function show(value: unknown): string {
  if (value === null || value === undefined) return '(none)'
  if (Array.isArray(value)) return `[${value.map(show).join(', ')}]`
  if (typeof value === 'string') return value === '' ? '""' : value
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

export function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null)
}

/** One line per field whose value differs, in the order of `fields`. */
export function fieldChanges<T extends object>(label: string, before: T, after: T, fields: readonly (keyof T & string)[]): string[] {
  return fields.filter((f) => !same(before[f], after[f])).map((f) => `${label}: ${f} ${show(before[f])} → ${show(after[f])}`)
}

/** Whether the items kept from `before` appear in another relative order in `after`. */
export function reordered(before: readonly string[], after: readonly string[]): boolean {
  const kept = new Set(after)
  const stillThere = new Set(before)
  return !same(before.filter((k) => kept.has(k)), after.filter((k) => stillThere.has(k)))
}

/** `1 live asset has` / `3 live assets have`. */
export function count(n: number, noun: string, verbs: [singular: string, plural: string] = ['has', 'have']): string {
  return n === 1 ? `1 ${noun} ${verbs[0]}` : `${n} ${noun}s ${verbs[1]}`
}
