import { v7 } from 'uuid'

/** Time-ordered UUIDv7: new rows land at the right edge of the primary-key index. */
export function newId(): string {
  return v7()
}

/** `2026-01-31T09:15:00Z`: UTC to the second (CONTRACT §1). */
export function isoSecond(value: Date | string | null): string | null {
  if (value === null) return null
  const date = value instanceof Date ? value : new Date(value)
  return `${date.toISOString().slice(0, 19)}Z`
}

export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
const UUID_RE = new RegExp(UUID_PATTERN)

export function isUuid(value: string): boolean {
  return UUID_RE.test(value)
}
