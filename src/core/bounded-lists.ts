/**
 * A schema whose lists check their items only when they are no longer than their `maxItems`
 * (deep; a new object, the schema given is left as it is for the API document). Ajv, gathering
 * every error, checks each item of a list of 500,000 wrong values before it says that the list
 * is too long, with the event loop held: 2.5 s for a 1 MB search body, 22 s for an 8 MB bulk
 * item's multi-select on a busy PGlite server (outside probes). A list too long now fails on its
 * length alone; one within bounds is checked as before.
 */
export function itemsWhenShort<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(itemsWhenShort) as T
  if (schema === null || typeof schema !== 'object') return schema
  const copy: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) copy[key] = key === 'enum' || key === 'examples' || key === 'default' || key === 'const' ? value : itemsWhenShort(value)
  if (typeof copy.maxItems !== 'number' || !isList(copy.type) || !('items' in copy || 'uniqueItems' in copy || 'contains' in copy)) return copy as T
  const { items, uniqueItems, contains, ...outer } = copy
  const checks = { ...(items !== undefined ? { items } : {}), ...(uniqueItems !== undefined ? { uniqueItems } : {}), ...(contains !== undefined ? { contains } : {}) }
  return { ...outer, if: { maxItems: copy.maxItems }, then: checks } as T
}

function isList(type: unknown): boolean {
  return type === 'array' || (Array.isArray(type) && type.includes('array'))
}
