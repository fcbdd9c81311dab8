import type { Queryable } from '../../store/db.js'
import type { Grant } from './levels.js'
import type { AuthContext } from './context.js'
import { effectivePermission, type UserPermission } from './permissions.js'

/**
 * The AuthContext of a signed-in console user (CONTRACT §15): the API's rules applied to the
 * user with ALL of the user's roles, as if the user held an Admin key with every role it has —
 * effective permission = min(Admin, the user's type), exactly as `authenticate.ts` computes a key's.
 * Services take it like any key's context. `keyId` is '' (no API key acts).
 *
 * Null when the user is unknown, disabled or cannot sign in with a password.
 */
export async function userAuthContext(db: Queryable, orgId: string, userId: string): Promise<AuthContext | null> {
  const row = (await db.query<{
    id: string; org_key: string; permission_type: UserPermission; role_keys: string[]; enabled: boolean
    sign_in_methods: string[]; rate_limit_requests: number; rate_limit_window_seconds: number; grants: Grant[]
  }>(
    `SELECT u.id, o.key AS org_key, u.permission_type, u.role_keys, u.enabled, u.sign_in_methods,
            o.rate_limit_requests, o.rate_limit_window_seconds,
            (SELECT coalesce(jsonb_agg(g), '[]'::jsonb) FROM roles r, jsonb_array_elements(r.grants) g
              WHERE r.org_id = u.org_id AND r.key = ANY(u.role_keys)) AS grants
     FROM users u JOIN organizations o ON o.id = u.org_id
     WHERE u.org_id = $1 AND u.id = $2`,
    [orgId, userId],
  )).rows[0]
  if (!row || !row.enabled || !row.sign_in_methods.includes('password')) return null
  return {
    orgId,
    orgKey: row.org_key,
    keyId: '',
    userId: row.id,
    keyPermission: 'Admin',
    ownerPermission: row.permission_type,
    permission: effectivePermission('Admin', row.permission_type),
    roleKeys: row.role_keys,
    grants: row.grants,
    rateLimit: { requests: row.rate_limit_requests, windowSeconds: row.rate_limit_window_seconds },
  }
}
