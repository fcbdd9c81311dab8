import { createHash, randomBytes } from 'node:crypto'
import type { Db } from '../store/db.js'
import { verifyPassword } from './passwords.js'
import {
  NO_ORG, clearFailures, deleteSession, insertSession, recordFailures, selectLocked, selectSignInCandidates, touchSession,
  type FlashTaken, type SessionRow,
} from './sql.js'

/**
 * Slowing failed sign-ins (CONTRACT §15), counted in the database so every process sees them:
 * per email, 3 failures within 15 minutes are free, then each further failure locks the email for
 * 2, 4, 8 … seconds (at most 15 minutes); per client address the same after 30 failures (many
 * people may share one address). A locked attempt is refused without checking the password and
 * gets the one failure message. A successful sign-in clears its email's count.
 */
export const THROTTLE = { emailFree: 3, addressFree: 30, windowSeconds: 15 * 60, maxLockSeconds: 15 * 60 }

export type SignInResult =
  | { ok: true; orgId: string; userId: string; token: string }
  | { ok: false; chooseOrganization?: { key: string; name: string }[] }

const emailSubject = (email: string) => `email:${email.trim().toLowerCase()}`

/**
 * Emails are unique per organization only. The password decides: the accounts with this email
 * whose password matches; when several organizations match, the optional organization key
 * picks one (the form then asks for it). Disabled users and users without the `password`
 * sign-in method never match.
 */
export async function signIn(db: Db, input: { email: string; password: string; organization?: string; address: string }): Promise<SignInResult> {
  const email = input.email.trim()
  const candidates = email === '' ? [] : await selectSignInCandidates(db, email)
  const orgsOfEmail = candidates.length > 0 ? [...new Set(candidates.map((c) => c.org_id))] : [NO_ORG]
  const keys = [
    ...orgsOfEmail.map((org_id) => ({ org_id, subject: emailSubject(email), free: THROTTLE.emailFree })),
    { org_id: NO_ORG, subject: `ip:${input.address}`, free: THROTTLE.addressFree },
  ]
  const fail = async (): Promise<SignInResult> => {
    await recordFailures(db, keys, THROTTLE.windowSeconds, THROTTLE.maxLockSeconds)
    return { ok: false }
  }
  if (await selectLocked(db, keys)) return { ok: false }
  const usable = candidates.filter((c) => c.enabled && c.sign_in_methods.includes('password'))
  if (usable.length === 0) {
    await verifyPassword(input.password, null) // the same time as a wrong password
    return fail()
  }
  const matching = []
  for (const c of usable) if (await verifyPassword(input.password, c.password_hash)) matching.push(c)
  const wanted = input.organization?.trim()
  const chosen = oneAccountPerOrganization(wanted ? matching.filter((c) => c.org_key === wanted) : matching, email)
  if (chosen.length === 0) return fail()
  if (chosen.length > 1) return { ok: false, chooseOrganization: chosen.map((c) => ({ key: c.org_key, name: c.org_name })) }
  const user = chosen[0]!
  // The email's failures were counted in every organization that holds it (the lock reads them
  // all): a success clears them all, or one typo after it would lock the email again.
  await clearFailures(db, orgsOfEmail, emailSubject(email))
  const token = randomBytes(32).toString('base64url')
  await insertSession(db, user.org_id, sessionId(token), user.user_id)
  return { ok: true, orgId: user.org_id, userId: user.user_id, token: `${user.org_id}.${token}` }
}

/**
 * Emails are matched case-insensitively, but an organization may hold two users whose emails
 * differ only by case (users_email_unique compares them as written, as `kbis apply` and the CLI
 * do). Where both accept the password, the one with exactly the email typed is meant; with none of
 * them written so, that organization's account cannot be told, and it is left out.
 */
function oneAccountPerOrganization<C extends { org_id: string; email: string }>(accounts: readonly C[], email: string): C[] {
  const byOrg = new Map<string, C[]>()
  for (const a of accounts) byOrg.set(a.org_id, [...(byOrg.get(a.org_id) ?? []), a])
  return [...byOrg.values()].flatMap((same) => (same.length === 1 ? same : same.filter((a) => a.email === email)))
}

/** The stored id of a session: the token's hash, never the token. */
function sessionId(token: string): string {
  return createHash('sha256').update(token).digest('base64url')
}

/** Splits the cookie value `<org id>.<token>`; null when it is not one. */
export function parseSessionCookie(value: string | undefined): { orgId: string; id: string } | null {
  const match = value ? /^([0-9a-f-]{36})\.([A-Za-z0-9_-]{43})$/.exec(value) : null
  return match ? { orgId: match[1]!, id: sessionId(match[2]!) } : null
}

export async function loadSession(db: Db, cookie: string | undefined, idleMinutes: number, takes: FlashTaken = 'all'): Promise<(SessionRow & { id: string }) | null> {
  const parsed = parseSessionCookie(cookie)
  if (!parsed) return null
  const row = await touchSession(db, parsed.orgId, parsed.id, idleMinutes * 60, takes)
  return row && !row.idle ? { ...row, id: parsed.id } : null
}

export async function signOut(db: Db, cookie: string | undefined): Promise<void> {
  const parsed = parseSessionCookie(cookie)
  if (parsed) await deleteSession(db, parsed.orgId, parsed.id)
}
