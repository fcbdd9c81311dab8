import type { Queryable } from '../store/db.js'

/** The scope of one key (CONTRACT §16: API key, method, path) inside its organization. */
export interface KeyScope {
  orgId: string
  apiKeyId: string
  method: string
  path: string
  key: string
}

export interface StoredKey {
  fingerprint: string
  /** null while the first request runs. */
  status: number | null
  /**
   * No answer, and none will come: the first request's changes committed (`written`) and its
   * process stopped beating before it stored the answer (it died in between).
   */
  lost: boolean
  headers: Record<string, string> | null
  body: string | null
}

const SCOPE = 'org_id = $1 AND api_key_id = $2 AND method = $3 AND path = $4 AND idempotency_key = $5'
const scopeValues = (s: KeyScope) => [s.orgId, s.apiKeyId, s.method, s.path, s.key]

/**
 * Claims the key for one request: true when this request may run. One statement, so that of two
 * requests racing on one key (in this process or another on the same database) exactly one wins.
 * An expired row, or a claim whose heartbeat (refreshClaims) stopped `staleSeconds` ago (its
 * process died), is taken over, unless that claim's changes were written (markWritten): running
 * the request again would write them twice.
 */
export async function claimKey(db: Queryable, scope: KeyScope, claim: { id: string; fingerprint: string; ttlSeconds: number; staleSeconds: number }): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO idempotency_keys AS k (org_id, api_key_id, method, path, idempotency_key, fingerprint, claim_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now() + $8::int * interval '1 second')
     ON CONFLICT (org_id, api_key_id, method, path, idempotency_key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, claim_id = EXCLUDED.claim_id, status = NULL, headers = NULL, body = NULL,
           created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
       WHERE k.expires_at <= now() OR (k.status IS NULL AND NOT k.written AND k.created_at < now() - $9::int * interval '1 second')
     RETURNING 1 AS claimed`,
    [...scopeValues(scope), claim.fingerprint, claim.id, claim.ttlSeconds, claim.staleSeconds],
  )
  return result.rows.length === 1
}

/** The live row of a key, or null (it expired or its first request gave it back meanwhile). */
export async function readKey(db: Queryable, scope: KeyScope, staleSeconds: number): Promise<StoredKey | null> {
  const result = await db.query<StoredKey>(
    `SELECT fingerprint, status, headers, body, (status IS NULL AND written AND created_at < now() - $6::int * interval '1 second') AS lost
     FROM idempotency_keys WHERE ${SCOPE} AND expires_at > now()`,
    [...scopeValues(scope), staleSeconds],
  )
  return result.rows[0] ?? null
}

/** Stores the response of the request holding the claim (found by its key, then its claim). */
export async function completeKey(db: Queryable, scope: KeyScope, claimId: string, response: { status: number; headers: Record<string, string>; body: string }): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET status = $7, headers = $8, body = $9 WHERE ${SCOPE} AND claim_id = $6`,
    [...scopeValues(scope), claimId, response.status, JSON.stringify(response.headers), response.body],
  )
}

/**
 * Marks the claim's changes as written, inside the write's own transaction (cut-off.ts runs it
 * before each commit of the request): the mark commits exactly when the changes do.
 */
export async function markWritten(tx: Queryable, scope: KeyScope, claimId: string): Promise<void> {
  await tx.query(`UPDATE idempotency_keys SET written = true WHERE ${SCOPE} AND claim_id = $6 AND NOT written`, [...scopeValues(scope), claimId])
}

/** Gives a claim back (a 5xx or 429 answer is not kept: a retry runs again), unless its changes were written. */
export async function releaseKey(db: Queryable, scope: KeyScope, claimId: string): Promise<void> {
  await db.query(`DELETE FROM idempotency_keys WHERE ${SCOPE} AND claim_id = $6 AND status IS NULL AND NOT written`, [...scopeValues(scope), claimId])
}

/**
 * The heartbeat of the claims a process holds: their `created_at` moves to now, so that only a
 * claim whose process stopped beating (it died) grows stale and is taken over.
 */
export async function refreshClaims(db: Queryable, held: readonly { scope: KeyScope; id: string }[]): Promise<void> {
  const column = <T>(pick: (h: { scope: KeyScope; id: string }) => T): T[] => held.map(pick)
  await db.query(
    `UPDATE idempotency_keys AS k SET created_at = now()
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[]) AS u(org_id, api_key_id, method, path, idempotency_key, claim_id)
     WHERE k.org_id = u.org_id AND k.api_key_id = u.api_key_id AND k.method = u.method COLLATE "C" AND k.path = u.path COLLATE "C"
       AND k.idempotency_key = u.idempotency_key COLLATE "C" AND k.claim_id = u.claim_id AND k.status IS NULL`,
    [column((h) => h.scope.orgId), column((h) => h.scope.apiKeyId), column((h) => h.scope.method), column((h) => h.scope.path), column((h) => h.scope.key), column((h) => h.id)],
  )
}

/**
 * Claims no process can hold any more: the embedded store belongs to the one process opening it.
 * A claim whose changes were written stays (its repeats are answered 409, not run again).
 */
export async function dropUnfinishedClaims(db: Queryable): Promise<number> {
  return (await db.query('DELETE FROM idempotency_keys WHERE status IS NULL AND NOT written')).rowCount
}

/** Deletes every expired key, in every organization; returns how many. */
export async function purgeExpiredKeys(db: Queryable): Promise<number> {
  const result = await db.query('DELETE FROM idempotency_keys WHERE expires_at <= now()')
  return result.rowCount
}
