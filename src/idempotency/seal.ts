import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

/**
 * Stored answers are sealed with a key that only their caller holds: AES-256-GCM under a key
 * derived (HKDF-SHA256) from the API key secret the request was sent with and the idempotency
 * scope. The store keeps ciphertext, and a repeat, which presents the same API key, opens it.
 * So an answer carrying a secret that is shown once and stored only as a hash (CONTRACT §9: the
 * `secret` of POST /api-keys, of a new webhook, of a rotation) is not kept for 24 h in a form the
 * database alone gives away, yet the retry that never received the first answer gets it byte for
 * byte (§16). The same holds for every other answer (assets, lists of ids).
 */
const PREFIX = 'sealed:v1:'
const INFO = 'kbis idempotent answer'

function keyOf(token: string, scope: string): Buffer {
  return Buffer.from(hkdfSync('sha256', token, scope, INFO, 32))
}

/** The text to store for `body`; `scope` names the key's scope (API key, method, path, key). */
export function sealAnswer(token: string, scope: string, body: string): string {
  if (body === '') return ''
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keyOf(token, scope), iv)
  const data = Buffer.concat([cipher.update(body, 'utf8'), cipher.final()])
  return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64')
}

/**
 * The body sealAnswer sealed, or null when this token cannot open it. A stored body without the
 * prefix was kept before answers were sealed (JSON or empty) and is answered as it is.
 */
export function openAnswer(token: string, scope: string, stored: string): string | null {
  if (!stored.startsWith(PREFIX)) return stored
  const raw = Buffer.from(stored.slice(PREFIX.length), 'base64')
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(token, scope), raw.subarray(0, 12))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
  } catch {
    return null
  }
}
