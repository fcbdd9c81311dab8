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
  headers: Record<string, string> | null
  body: string | null
}

const SCOPE = 'org_id = $1 AND api_key_id = $2 AND method = $3 AND path = $4 AND idempotency_key = $5'
const scopeValues = (s: KeyScope) => [s.orgId, s.apiKeyId, s.method, s.path, s.key]

/**
 * Claims the key for one request: true when this request may run. One statement, so that of two
 * requests racing on one key (in this process or another on the same database) exactly one wins.
 * An expired row, or a claim left running longer than `staleSeconds` (its process died), is taken
 * over.
 */
export async function claimKey(db: Queryable, scope: KeyScope, claim: { id: string; fingerprint: string; ttlSeconds: number; staleSeconds: number }): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO idempotency_keys AS k (org_id, api_key_id, method, path, idempotency_key, fingerprint, claim_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now() + $8::int * interval '1 second')
     ON CONFLICT (org_id, api_key_id, method, path, idempotency_key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, claim_id = EXCLUDED.claim_id, status = NULL, headers = NULL, body = NULL,
           created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
       WHERE k.expires_at <= now() OR (k.status IS NULL AND k.created_at < now() - $9::int * interval '1 second')
     RETURNING 1 AS claimed`,
    [...scopeValues(scope), claim.fingerprint, claim.id, claim.ttlSeconds, claim.staleSeconds],
  )
  return result.rows.length === 1
}

/** The live row of a key, or null (it expired or its first request gave it back meanwhile). */
export async function readKey(db: Queryable, scope: KeyScope): Promise<StoredKey | null> {
  const result = await db.query<StoredKey>(
    `SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE ${SCOPE} AND expires_at > now()`,
    scopeValues(scope),
  )
  return result.rows[0] ?? null
}

/** Stores the response of the request holding the claim. */
export async function completeKey(db: Queryable, claimId: string, response: { status: number; headers: Record<string, string>; body: string }): Promise<void> {
  await db.query(
    'UPDATE idempotency_keys SET status = $2, headers = $3, body = $4 WHERE claim_id = $1',
    [claimId, response.status, JSON.stringify(response.headers), response.body],
  )
}

/** Gives a claim back (a 5xx or 429 answer is not kept: a retry runs again). */
export async function releaseKey(db: Queryable, claimId: string): Promise<void> {
  await db.query('DELETE FROM idempotency_keys WHERE claim_id = $1 AND status IS NULL', [claimId])
}

/** Deletes every expired key, in every organization; returns how many. */
export async function purgeExpiredKeys(db: Queryable): Promise<number> {
  const result = await db.query('DELETE FROM idempotency_keys WHERE expires_at <= now()')
  return result.rowCount
}
