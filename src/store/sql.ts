/**
 * Positional parameters for one SQL statement. Values enter SQL only through `add`, which returns
 * the `$n` placeholder; identifiers never pass through here.
 */
export class Params {
  readonly values: unknown[] = []

  constructor(initial: readonly unknown[] = []) {
    this.values.push(...initial)
  }

  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
}

/** Quotes an identifier. Callers pass only names checked against a whitelist or the metamodel. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/**
 * A string literal for SQL text, for metamodel keys (already matching ^[a-z][a-z0-9_]*$) used in
 * `properties->>'key'`: inlined rather than parameterized so expression indexes on
 * `properties->>'key'` still match the query.
 */
export function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`
}

/** Escapes LIKE/ILIKE wildcards so user text matches literally (with `ESCAPE '\'`). */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`)
}
