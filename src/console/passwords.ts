import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

/**
 * Console passwords: scrypt (memory-hard, in node:crypto, no native add-on). N = 2^15, r = 8,
 * p = 1 costs 32 MiB and roughly 50–150 ms per hash here (OWASP's scrypt minimum is N = 2^17 with
 * r = 8 at p = 1 for 128 MiB, or 2^15 at a higher p; we keep p = 1 for the 2-core machines we run
 * on and raise N by changing PARAMS: parameters live inside every hash string, so old hashes keep
 * verifying). Format: `scrypt$N$r$p$<salt base64>$<hash base64>`.
 */
const PARAMS = { N: 2 ** 15, r: 8, p: 1 }
const KEY_LENGTH = 32

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r + 1024 * 1024 }
  return new Promise((resolve, reject) => scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))))
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, PARAMS)
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${key.toString('base64')}`
}

/** Constant-time comparison; a malformed or missing hash never matches. */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const parts = (stored ?? DUMMY).split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number]
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || N > 2 ** 20 || r > 32 || p > 16) return false
  const expected = Buffer.from(parts[5]!, 'base64')
  const key = await derive(password, Buffer.from(parts[4]!, 'base64'), { N, r, p })
  return stored !== null && expected.length === key.length && timingSafeEqual(expected, key)
}

/**
 * Verified when the account does not exist or has no password, so that an unknown email costs
 * the same time as a wrong password (no account enumeration by timing).
 */
const DUMMY = `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEY_LENGTH).toString('base64')}`

/** Rules a new password must meet (the CLI checks them). */
export function passwordProblem(password: string): string | null {
  if (password.length < 12) return 'the password must have at least 12 characters'
  if (password.length > 1024) return 'the password must have at most 1024 characters'
  return null
}
