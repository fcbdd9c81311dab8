import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/**
 * API key tokens look like `kbis_<prefix>_<secret>`. The prefix (public, 12 hex characters) finds
 * the key; the whole token is stored only as a SHA-256 hash. A 256-bit random secret needs no
 * slow password hash: it cannot be guessed, only stolen, and a hash of it is useless to a thief.
 */
/** How every token starts; the `secret_prefix` of a key record includes it. */
export const TOKEN_PREFIX = 'kbis_'

const TOKEN_RE = /^kbis_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/

export interface NewToken {
  token: string
  prefix: string
  hash: Buffer
}

export function generateToken(): NewToken {
  const prefix = randomBytes(6).toString('hex')
  const token = `kbis_${prefix}_${randomBytes(32).toString('base64url')}`
  return { token, prefix, hash: hashToken(token) }
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/** The key prefix of a well-formed token, or null. */
export function tokenPrefix(token: string): string | null {
  return TOKEN_RE.exec(token)?.[1] ?? null
}

/**
 * The key prefix of a token's public start as logs and key lists show it (`kbis_3f9a0c1d2e4b`),
 * or of a whole token; null for anything else.
 */
export function prefixOfTokenStart(text: string): string | null {
  return /^kbis_([0-9a-f]{12})(?:_[A-Za-z0-9_-]*)?$/.exec(text)?.[1] ?? null
}

/** Constant-time comparison of a presented token with the stored hash. */
export function tokenMatches(token: string, storedHash: Uint8Array): boolean {
  const presented = hashToken(token)
  return storedHash.length === presented.length && timingSafeEqual(presented, storedHash)
}
