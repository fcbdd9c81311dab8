import type { Queryable } from '../store/db.js'
import type { EventOrigin } from '../outbox/write.js'
import { changedKeyFields, writeApiKeyEvent } from './events.js'
import { Params, selectPage } from '../store/sql.js'

/** What a key is, as it is written and read back (the secret's hash is written, never read). */
interface ApiKeyFields {
  id: string
  name: string
  description: string | null
  permission_type: 'Viewer' | 'Editor' | 'Admin'
  role_keys: string[]
  owner_user_id: string
  secret_prefix: string
}

export interface ApiKeyRow extends ApiKeyFields {
  created_at: Date
  updated_at: Date
  last_used_at: Date | null
}

export const API_KEY_COLUMNS =
  'id, name, description, permission_type, role_keys, owner_user_id, secret_prefix, created_at, updated_at, last_used_at'

export interface NewApiKey extends ApiKeyFields {
  secret_hash: Buffer
}

/** THE insert of a key; writes its `api_key.created` event (never with the secret) in the same transaction. */
export async function insertApiKey(tx: Queryable, origin: EventOrigin, key: NewApiKey): Promise<ApiKeyRow> {
  const orgId = origin.orgId
  const result = await tx.query<ApiKeyRow>(
    `INSERT INTO api_keys (org_id, id, name, description, permission_type, role_keys, owner_user_id, secret_prefix, secret_hash,
                           created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, date_trunc('second', now()), date_trunc('second', now()))
     RETURNING ${API_KEY_COLUMNS}`,
    [orgId, key.id, key.name, key.description, key.permission_type, key.role_keys, key.owner_user_id, key.secret_prefix, key.secret_hash],
  )
  const row = result.rows[0]!
  await writeApiKeyEvent(tx, origin, 'api_key.created', row)
  return row
}

/** One page of an organization's keys, optionally only those of one owner, oldest first. */
export async function selectApiKeyPage(
  db: Queryable,
  orgId: string,
  ownerUserId: string | null,
  limit: number,
  offset: number,
): Promise<{ rows: ApiKeyRow[]; total: number }> {
  return selectPage<ApiKeyRow>(db, { select: API_KEY_COLUMNS, from: 'api_keys' }, {
    where: 'org_id = $1 AND ($2::uuid IS NULL OR owner_user_id = $2::uuid)', orderBy: 'created_at, id', limit, offset, params: new Params([orgId, ownerUserId]),
  })
}

/** Every key of the organization with its owner's email, oldest first (`kbis keys list`). */
export async function selectKeysWithOwners(db: Queryable, orgId: string): Promise<(ApiKeyRow & { owner_email: string })[]> {
  const columns = API_KEY_COLUMNS.split(', ').map((c) => `k.${c}`).join(', ')
  const result = await db.query<ApiKeyRow & { owner_email: string }>(
    `SELECT ${columns}, u.email AS owner_email FROM api_keys k JOIN users u ON u.org_id = k.org_id AND u.id = k.owner_user_id
     WHERE k.org_id = $1 ORDER BY k.created_at, k.id`, [orgId])
  return result.rows
}

/** The key of the organization whose token starts `kbis_<prefix>`, locked (`kbis keys revoke`). */
export async function selectApiKeyByPrefix(tx: Queryable, orgId: string, prefix: string): Promise<ApiKeyRow | null> {
  const result = await tx.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE org_id = $1 AND secret_prefix = $2 FOR UPDATE`, [orgId, prefix])
  return result.rows[0] ?? null
}

/** One key of the organization; `forUpdate` locks it for the rest of the transaction. */
export async function selectApiKey(db: Queryable, orgId: string, id: string, forUpdate = false): Promise<ApiKeyRow | null> {
  const lock = forUpdate ? ' FOR UPDATE' : ''
  const result = await db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE org_id = $1 AND id = $2${lock}`, [orgId, id])
  return result.rows[0] ?? null
}

export interface ApiKeyChange {
  name: string
  description: string | null
  permission_type: 'Viewer' | 'Editor' | 'Admin'
  role_keys: string[]
  owner_user_id: string
}

/**
 * THE update of a key (PATCH, transfer); writes `api_key.updated` with the changed record fields
 * when any changed. `before` is the row as the caller locked it. A change that changes nothing
 * writes nothing: `updated_at` is kept and no event is written, as for assets (CONTRACT §13).
 */
export async function updateApiKey(tx: Queryable, origin: EventOrigin, before: ApiKeyRow, change: ApiKeyChange): Promise<ApiKeyRow> {
  if (changedKeyFields(before, change).length === 0) return before
  const result = await tx.query<ApiKeyRow>(
    `UPDATE api_keys SET name = $3, description = $4, permission_type = $5, role_keys = $6::text[], owner_user_id = $7,
            updated_at = date_trunc('second', now())
     WHERE org_id = $1 AND id = $2
     RETURNING ${API_KEY_COLUMNS}`,
    [origin.orgId, before.id, change.name, change.description, change.permission_type, change.role_keys, change.owner_user_id],
  )
  const row = result.rows[0]!
  await writeApiKeyEvent(tx, origin, 'api_key.updated', row, before)
  return row
}

/** Deletes a key for good (a suspected-exposed key is deleted and replaced); true when it existed. */
export async function deleteApiKey(tx: Queryable, origin: EventOrigin, id: string): Promise<boolean> {
  const result = await tx.query<ApiKeyRow>(`DELETE FROM api_keys WHERE org_id = $1 AND id = $2 RETURNING ${API_KEY_COLUMNS}`, [origin.orgId, id])
  const row = result.rows[0]
  if (row) await writeApiKeyEvent(tx, origin, 'api_key.deleted', row)
  return row !== undefined
}

/**
 * Takes a removed role out of every key of the organization (`kbis apply`), each key's change
 * emitting `api_key.updated`; returns how many keys changed.
 */
export async function removeRoleFromKeys(tx: Queryable, origin: EventOrigin, roleKey: string): Promise<number> {
  const result = await tx.query<ApiKeyRow & { before_role_keys: string[] }>(
    `UPDATE api_keys k SET role_keys = array_remove(k.role_keys, $2), updated_at = date_trunc('second', now())
     FROM (SELECT id, role_keys FROM api_keys WHERE org_id = $1 AND $2 = ANY(role_keys) FOR UPDATE) b
     WHERE k.org_id = $1 AND k.id = b.id
     RETURNING ${API_KEY_COLUMNS.split(', ').map((c) => `k.${c}`).join(', ')}, b.role_keys AS before_role_keys`,
    [origin.orgId, roleKey],
  )
  for (const { before_role_keys, ...row } of result.rows) {
    await writeApiKeyEvent(tx, origin, 'api_key.updated', row, { ...row, role_keys: before_role_keys })
  }
  return result.rows.length
}

/** The keys among `keys` that name roles of the organization. */
export async function selectExistingRoleKeys(db: Queryable, orgId: string, keys: readonly string[]): Promise<Set<string>> {
  const result = await db.query<{ key: string }>('SELECT key FROM roles WHERE org_id = $1 AND key = ANY($2::text[])', [orgId, keys])
  return new Set(result.rows.map((r) => r.key))
}

/** What the key rules need of the user who owns (or is to own) a key. */
export interface KeyOwner {
  id: string
  email: string
  role_keys: string[]
}

/** A user of the organization by id (a UUID: callers check) or by email (the CLI). */
export async function selectKeyOwner(db: Queryable, orgId: string, by: { id: string } | { email: string }): Promise<KeyOwner | null> {
  const [column, value] = 'id' in by ? ['id', by.id] : ['email', by.email]
  const result = await db.query<KeyOwner>(`SELECT id, email, role_keys FROM users WHERE org_id = $1 AND ${column} = $2`, [orgId, value])
  return result.rows[0] ?? null
}

/** An organization's id by its key (the CLI names organizations by key). */
export async function selectOrgIdByKey(db: Queryable, orgKey: string): Promise<string | null> {
  return (await db.query<{ id: string }>('SELECT id FROM organizations WHERE key = $1', [orgKey])).rows[0]?.id ?? null
}
