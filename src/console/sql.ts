import type { Queryable } from '../store/db.js'

/** The nil UUID: the bucket of failed sign-ins that belong to no organization (migration 0011). */
export const NO_ORG = '00000000-0000-0000-0000-000000000000'

export interface SignInCandidate {
  org_id: string
  org_key: string
  org_name: string
  user_id: string
  email: string
  enabled: boolean
  sign_in_methods: string[]
  password_hash: string | null
}

/** Every account with this email (emails are unique per organization, not across them). */
export async function selectSignInCandidates(db: Queryable, email: string): Promise<SignInCandidate[]> {
  const result = await db.query<SignInCandidate>(
    `SELECT u.org_id, o.key AS org_key, o.name AS org_name, u.id AS user_id, u.email, u.enabled, u.sign_in_methods, u.password_hash
     FROM users u JOIN organizations o ON o.id = u.org_id
     WHERE lower(u.email) = lower($1)
     ORDER BY o.key`,
    [email],
  )
  return result.rows
}

/**
 * Sets the password of the one user with exactly this email (users_email_unique compares it case
 * included, as `apply` and `kbis keys create --user` do): `a@x.test` and `A@x.test` are two users.
 */
/**
 * Sets a user's password hash and ends the user's console sessions in the same statement: a
 * session signed in with the old password (a cookie someone else may hold) does not outlive it.
 */
export async function setPasswordHash(db: Queryable, orgKey: string, email: string, hash: string): Promise<{ org_id: string; user_id: string; enabled: boolean; by_password: boolean; sessions_ended: number } | null> {
  const result = await db.query<{ org_id: string; user_id: string; enabled: boolean; by_password: boolean; sessions_ended: number }>(
    `WITH changed AS (
       UPDATE users u SET password_hash = $3 FROM organizations o
       WHERE o.key = $1 AND u.org_id = o.id AND u.email = $2
       RETURNING u.org_id, u.id, u.enabled, 'password' = ANY(u.sign_in_methods) AS by_password),
     ended AS (DELETE FROM console_sessions s USING changed c WHERE s.org_id = c.org_id AND s.user_id = c.id RETURNING 1)
     SELECT org_id, id AS user_id, enabled, by_password, (SELECT count(*)::int FROM ended) AS sessions_ended FROM changed`,
    [orgKey, email, hash],
  )
  return result.rows[0] ?? null
}

/** Whether any subject is locked now; the answer to a locked attempt is the usual failure. */
export async function selectLocked(db: Queryable, keys: readonly { org_id: string; subject: string }[]): Promise<boolean> {
  const result = await db.query<{ locked: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM console_sign_in_failures f
       JOIN json_to_recordset($1::json) AS k(org_id uuid, subject text) ON f.org_id = k.org_id AND f.subject = k.subject
       WHERE f.locked_until > now()) AS locked`,
    [JSON.stringify(keys)],
  )
  return result.rows[0]?.locked ?? false
}

/**
 * Counts one failure for each subject: a count older than the window starts again at 1; past
 * `free` failures the subject is locked for 2^(failures - free) seconds, at most `maxSeconds`.
 */
export async function recordFailures(
  db: Queryable,
  keys: readonly { org_id: string; subject: string; free: number }[],
  windowSeconds: number,
  maxSeconds: number,
): Promise<void> {
  // One small statement per subject (an email and an address: two or three per attempt).
  for (const k of keys) {
    await db.query(
      `INSERT INTO console_sign_in_failures AS f (org_id, subject, failures, last_failure_at, locked_until)
       VALUES ($1, $2, 1, now(), CASE WHEN $3::int < 1 THEN now() + make_interval(secs => 1) END)
       ON CONFLICT (org_id, subject) DO UPDATE SET
         failures = CASE WHEN f.last_failure_at < now() - make_interval(secs => $4) THEN 1 ELSE f.failures + 1 END,
         last_failure_at = now(),
         locked_until = CASE
           WHEN f.last_failure_at < now() - make_interval(secs => $4) THEN NULL
           WHEN f.failures + 1 > $3::int THEN now() + make_interval(secs => least($5::float8, power(2, f.failures + 1 - $3::int)))
           END`,
      [k.org_id, k.subject, k.free, windowSeconds, maxSeconds],
    )
  }
}

/** Clears the counts of `subject` in each of `orgIds` (an email's failures are counted in every organization that holds it). */
export async function clearFailures(db: Queryable, orgIds: readonly string[], subject: string): Promise<void> {
  await db.query('DELETE FROM console_sign_in_failures WHERE org_id = ANY($1::uuid[]) AND subject = $2', [orgIds, subject])
}

export interface SessionRow {
  org_id: string
  user_id: string
  flash: Flash | null
  idle: boolean
}

/** A message for the next page; `secret` once, right after a key or webhook is created. */
export interface Flash {
  notice?: string
  error?: string
  /** New secrets not shown yet, oldest first: a change made in another tab before they were shown adds its own. */
  secrets?: FlashSecret[]
  /** What was typed into a refused form (`of` names the form), shown in it again with the error. */
  form?: TypedForm
}

export interface FlashSecret {
  /** What the secret belongs to (`the API key <name>`, `the webhook <url>`): shown beside it. */
  of: string
  value: string
  section?: 'keys' | 'webhooks'
}

export interface TypedForm {
  of: string
  values: Record<string, string | string[]>
}

export async function insertSession(db: Queryable, orgId: string, id: string, userId: string): Promise<void> {
  await db.query('INSERT INTO console_sessions (org_id, id, user_id) VALUES ($1, $2, $3)', [orgId, id, userId])
}

/**
 * Which flash the page being served shows, and so takes: `all` (the page that shows new secrets),
 * `plain` (a page that shows messages: it takes the message and leaves the secrets for the page
 * that shows them, so that another tab's page does not lose them), `none` (an htmx request,
 * which shows no message).
 */
export type FlashTaken = 'all' | 'plain' | 'none'

/**
 * Reads a session and, when it is still within the idle timeout, touches it and takes its flash
 * as `takes` says (one statement: a flash is shown exactly once, also with two tabs). An idle
 * session is deleted.
 */
export async function touchSession(db: Queryable, orgId: string, id: string, idleSeconds: number, takes: FlashTaken = 'all'): Promise<SessionRow | null> {
  const result = await db.query<SessionRow>(
    `WITH s AS (SELECT org_id, id, user_id, last_seen_at < now() - make_interval(secs => $3) AS idle,
                       CASE $4::text WHEN 'all' THEN flash WHEN 'plain' THEN nullif(flash - 'secrets', '{}'::jsonb) END AS shown,
                       CASE $4::text WHEN 'all' THEN NULL
                                     WHEN 'plain' THEN CASE WHEN flash->'secrets' IS NOT NULL THEN jsonb_build_object('secrets', flash->'secrets') END
                                     ELSE flash END AS kept
                FROM console_sessions WHERE org_id = $1 AND id = $2 FOR UPDATE),
          touched AS (UPDATE console_sessions c SET last_seen_at = now(), flash = s.kept FROM s
                      WHERE c.org_id = s.org_id AND c.id = s.id AND NOT s.idle),
          dropped AS (DELETE FROM console_sessions c USING s WHERE c.org_id = s.org_id AND c.id = s.id AND s.idle)
     SELECT org_id, user_id, CASE WHEN NOT idle THEN shown END AS flash, idle FROM s`,
    [orgId, id, idleSeconds, takes],
  )
  return result.rows[0] ?? null
}

/**
 * Leaves `flash` for the session's next page. It replaces the message of a flash not shown yet, not
 * its secrets: those stay, and the new flash's are added after them (a key created in each of two
 * tabs before either page loaded shows both secrets, once).
 */
export async function setFlash(db: Queryable, orgId: string, id: string, flash: Flash): Promise<void> {
  await db.query(
    `UPDATE console_sessions SET flash = CASE WHEN flash->'secrets' IS NULL THEN $3::jsonb
       ELSE jsonb_set($3::jsonb, '{secrets}', (flash->'secrets') || coalesce($3::jsonb->'secrets', '[]'::jsonb)) END
     WHERE org_id = $1 AND id = $2`,
    [orgId, id, JSON.stringify(flash)],
  )
}

export async function deleteSession(db: Queryable, orgId: string, id: string): Promise<void> {
  await db.query('DELETE FROM console_sessions WHERE org_id = $1 AND id = $2', [orgId, id])
}

/** Sessions idle longer than the timeout, every organization (a periodic purge). */
export async function purgeIdleSessions(db: Queryable, idleSeconds: number): Promise<void> {
  await db.query('DELETE FROM console_sessions WHERE last_seen_at < now() - make_interval(secs => $1)', [idleSeconds])
}

export interface ActorNames {
  keys: Map<string, { name: string; secret_prefix: string; owner_user_id: string }>
  users: Map<string, string>
}

/** The names of the API keys and users that acted in some events (deleted ones are missing). */
export async function selectActorNames(db: Queryable, orgId: string, keyIds: readonly string[], userIds: readonly string[]): Promise<ActorNames> {
  const [keys, users] = await Promise.all([
    keyIds.length === 0 ? { rows: [] } : db.query<{ id: string; name: string; secret_prefix: string; owner_user_id: string }>(
      'SELECT id, name, secret_prefix, owner_user_id FROM api_keys WHERE org_id = $1 AND id = ANY($2::uuid[])', [orgId, keyIds]),
    userIds.length === 0 ? { rows: [] } : db.query<{ id: string; email: string }>(
      'SELECT id, email FROM users WHERE org_id = $1 AND id = ANY($2::uuid[])', [orgId, userIds]),
  ])
  return {
    keys: new Map(keys.rows.map((k) => [k.id, { name: k.name, secret_prefix: k.secret_prefix, owner_user_id: k.owner_user_id }])),
    users: new Map(users.rows.map((u) => [u.id, u.email])),
  }
}
