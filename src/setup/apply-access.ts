import { v7 as uuidv7 } from 'uuid'
import { refuse, record, type ApplyContext } from './context.js'
import { count, fieldChanges } from './diff.js'
import { countLiveInDomain } from './guards.js'
import { selectUsers } from './state.js'
import type { AccessDomainSpec, RoleSpec, UserSpec } from './types.js'
import { removeRoleFromKeys } from '../keys/sql.js'
import { operatorOrigin } from '../outbox/write.js'
import { TOKEN_PREFIX } from '../core/auth/tokens.js'

/** Roles kept from the store (the file lists no roles) that grant on access domain `key`. */
function storedRolesOnDomain(ctx: ApplyContext, key: string): string[] {
  if (ctx.setup.roles) return []
  return [...ctx.state.roles.values()].filter((r) => r.grants.some((g) => g.access_domain_key === key)).map((r) => r.key)
}

async function removeAccessDomain(ctx: ApplyContext, key: string): Promise<void> {
  const live = await countLiveInDomain(ctx.tx, ctx.orgId, key)
  if (live > 0) refuse(ctx, `cannot remove access domain ${key}: ${count(live, 'live asset', ['is', 'are'])} in it`)
  const roles = storedRolesOnDomain(ctx, key)
  if (roles.length > 0) refuse(ctx, `cannot remove access domain ${key}: role ${roles[0]}, not listed in the file, grants on it`)
  await ctx.tx.query('DELETE FROM access_domains WHERE org_id = $1 AND key = $2', [ctx.orgId, key])
  record(ctx, [`access domain ${key}: removed`])
}

async function upsertAccessDomain(ctx: ApplyContext, d: AccessDomainSpec): Promise<void> {
  const before = ctx.state.accessDomains.get(d.key)
  if (!before) {
    await ctx.tx.query('INSERT INTO access_domains (org_id, key, name, description) VALUES ($1, $2, $3, $4)', [
      ctx.orgId, d.key, d.name, d.description,
    ])
    return record(ctx, [`access domain ${d.key}: created`])
  }
  const lines = fieldChanges(`access domain ${d.key}`, before, d, ['name', 'description'])
  if (lines.length === 0) return
  await ctx.tx.query('UPDATE access_domains SET name = $3, description = $4 WHERE org_id = $1 AND key = $2', [
    ctx.orgId, d.key, d.name, d.description,
  ])
  record(ctx, lines)
}

/** Declarative: the file's access domains replace the stored ones (when the file lists them). */
export async function applyAccessDomains(ctx: ApplyContext): Promise<void> {
  const wanted = ctx.setup.access_domains
  if (!wanted) return
  const keys = new Set(wanted.map((d) => d.key))
  for (const key of ctx.state.accessDomains.keys()) if (!keys.has(key)) await removeAccessDomain(ctx, key)
  for (const d of wanted) await upsertAccessDomain(ctx, d)
}

/**
 * A removed role is also taken out of every user's and API key's role_keys: a role key left
 * behind would silently grant again if a role of that key were created later.
 */
async function removeRole(ctx: ApplyContext, key: string): Promise<void> {
  // A key has one or more roles (specification, API keys): one left with none is refused, as
  // POST /api-keys refuses it, rather than kept as a key that sees nothing or removed unasked.
  const last = await ctx.tx.query<{ name: string; secret_prefix: string; email: string; n: number }>(
    `SELECT k.name, k.secret_prefix, u.email, count(*) OVER ()::int AS n
     FROM api_keys k JOIN users u ON u.org_id = k.org_id AND u.id = k.owner_user_id
     WHERE k.org_id = $1 AND $2 = ANY(k.role_keys) AND k.role_keys <@ ARRAY[$2]::text[] ORDER BY k.created_at, k.id LIMIT 1`,
    [ctx.orgId, key],
  )
  const only = last.rows[0]
  // Named by the start of its token as keys list shows it and keys revoke takes it (kbis_<12 hex>).
  if (only) {
    const more = only.n > 1 ? ` and ${only.n - 1} other API key(s)` : ''
    refuse(ctx, `cannot remove role ${key}: it is the only role of API key "${only.name}" (${TOKEN_PREFIX}${only.secret_prefix}, of ${only.email})${more}; give the key another role or revoke it first (kbis keys revoke)`)
  }
  await ctx.tx.query('DELETE FROM roles WHERE org_id = $1 AND key = $2', [ctx.orgId, key])
  const strip = (table: 'users', touch: string): Promise<{ rowCount: number }> =>
    ctx.tx.query(
      `UPDATE ${table} SET role_keys = array_remove(role_keys, $2)${touch} WHERE org_id = $1 AND $2 = ANY(role_keys)`,
      [ctx.orgId, key],
    )
  const users = (await strip('users', '')).rowCount
  // Keys through the one write path of keys, which emits their api_key.updated events.
  const keys = await removeRoleFromKeys(ctx.tx, operatorOrigin(ctx.orgId), key)
  const revoked = users + keys > 0 ? ` (revoked from ${users} user(s) and ${keys} API key(s))` : ''
  record(ctx, [`role ${key}: removed${revoked}`])
}

async function upsertRole(ctx: ApplyContext, r: RoleSpec): Promise<void> {
  const before = ctx.state.roles.get(r.key)
  const grants = JSON.stringify(r.grants)
  if (!before) {
    await ctx.tx.query('INSERT INTO roles (org_id, key, name, description, grants) VALUES ($1, $2, $3, $4, $5::jsonb)', [
      ctx.orgId, r.key, r.name, r.description, grants,
    ])
    return record(ctx, [`role ${r.key}: created`])
  }
  const lines = fieldChanges(`role ${r.key}`, before, r, ['name', 'description', 'grants'])
  if (lines.length === 0) return
  await ctx.tx.query('UPDATE roles SET name = $3, description = $4, grants = $5::jsonb WHERE org_id = $1 AND key = $2', [
    ctx.orgId, r.key, r.name, r.description, grants,
  ])
  record(ctx, lines)
}

/** Declarative: the file's roles replace the stored ones (when the file lists them). */
export async function applyRoles(ctx: ApplyContext): Promise<void> {
  const wanted = ctx.setup.roles
  if (!wanted) return
  const keys = new Set(wanted.map((r) => r.key))
  for (const key of ctx.state.roles.keys()) if (!keys.has(key)) await removeRole(ctx, key)
  for (const r of wanted) await upsertRole(ctx, r)
}

const USER_FIELDS = ['name', 'permission_type', 'role_keys', 'enabled', 'sign_in_methods'] as const

/**
 * Users are matched by email and created or updated; users the file does not list are left as
 * they are (never deleted nor disabled: they own API keys and history).
 */
export async function applyUsers(ctx: ApplyContext): Promise<void> {
  const wanted = ctx.setup.users
  if (!wanted) return
  const stored = await selectUsers(ctx.tx, ctx.orgId, wanted.map((u) => u.email))
  for (const u of wanted) {
    const before = stored.get(u.email)
    const values = [u.name, u.permission_type, u.role_keys, u.enabled, u.sign_in_methods]
    if (!before) {
      await ctx.tx.query(
        `INSERT INTO users (org_id, id, email, name, permission_type, role_keys, enabled, sign_in_methods)
         VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8::text[])`,
        [ctx.orgId, uuidv7(), u.email, ...values],
      )
      record(ctx, [`user ${u.email}: created`])
      continue
    }
    const lines = fieldChanges<UserSpec>(`user ${u.email}`, before, u, USER_FIELDS)
    if (lines.length === 0) continue
    await ctx.tx.query(
      `UPDATE users SET name = $3, permission_type = $4, role_keys = $5::text[], enabled = $6, sign_in_methods = $7::text[]
       WHERE org_id = $1 AND id = $2`,
      [ctx.orgId, before.id, ...values],
    )
    record(ctx, lines)
  }
}
