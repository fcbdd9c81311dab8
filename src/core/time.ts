import { randomFillSync } from 'node:crypto'
import { v7 } from 'uuid'
import { ISO_SECOND, type StoreDate } from '../store/timestamps.js'

// Random bytes for ids come from a pool refilled 256 ids at a time: one getRandomValues call per
// id (what `v7()` does alone) costs more than everything else of an id, 40 ms per bulk of 10,000.
const POOL_IDS = 256
const pool = new Uint8Array(16 * POOL_IDS)
let poolNext = POOL_IDS

function randomBytes16(): Uint8Array {
  if (poolNext === POOL_IDS) {
    randomFillSync(pool)
    poolNext = 0
  }
  return pool.subarray(16 * poolNext, 16 * ++poolNext)
}

// The monotonic state `v7()` keeps when called without options (uuid's updateV7State): a new
// millisecond starts a random 31-bit sequence, the same millisecond counts it up, and an
// overflow borrows the next millisecond. Ids of one process therefore sort in creation order.
const state = { msecs: -Infinity, seq: 0 }

/** Time-ordered UUIDv7: new rows land at the right edge of the primary-key index. */
export function newId(): string {
  const random = randomBytes16()
  const now = Date.now()
  if (now > state.msecs) {
    state.msecs = now
    state.seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!
  } else {
    state.seq = (state.seq + 1) | 0
    if (state.seq === 0) state.msecs++
  }
  v7({ random, msecs: state.msecs, seq: state.seq }, idBytes, 0)
  return formatUuid(idBytes)
}

// uuid writes the id's bytes here (its layout); the text is written into `idText` and read out
// once: uuid's own stringify joins twenty strings and lower-cases the result, ~900 bytes of
// garbage per id (18 MB per 10,000-item bulk with its events).
const idBytes = new Uint8Array(16)
const idText = Buffer.from('00000000-0000-0000-0000-000000000000', 'latin1')
const HEX = Buffer.from('0123456789abcdef', 'latin1')
const TEXT_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]

/** 16 bytes → `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lower case. */
export function formatUuid(bytes: Uint8Array): string {
  for (let i = 0; i < 16; i++) {
    const b = bytes[i]!
    idText[TEXT_AT[i]!] = HEX[b >> 4]!
    idText[TEXT_AT[i]! + 1] = HEX[b & 15]!
  }
  return idText.toString('latin1', 0, 36)
}

/** `2026-01-31T09:15:00Z`: UTC to the second (CONTRACT §1). */
export function isoSecond(value: Date | string | null): string | null {
  if (value === null) return null
  // A Date read from the store keeps the text it was parsed from (store/timestamps.ts).
  const known = (value as StoreDate)[ISO_SECOND]
  if (known !== undefined) return known
  const date = value instanceof Date ? value : new Date(value)
  return `${date.toISOString().slice(0, 19)}Z`
}

export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
const UUID_RE = new RegExp(UUID_PATTERN)

export function isUuid(value: string): boolean {
  return UUID_RE.test(value)
}
