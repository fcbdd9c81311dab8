import { v7 as uuidv7 } from 'uuid'
import type { Db, Tx } from '../store/db.js'

export type BootstrapResult = { created: true; orgId: string; ownerUserId: string } | { created: false }

export const DEFAULT_ORGANIZATION = { key: 'default', name: 'Default' }
export const DEFAULT_OWNER = { email: 'owner@default.local', name: 'Owner' }
export const DEFAULT_ROLE = {
  key: 'all',
  name: 'Everything',
  grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }],
}

/**
 * On a store without any organization (CONTRACT §12): organization `default`, its Owner user
 * (sign-in method `password`) and role `all` granting `edit_access_domain` everywhere. The caller
 * creates the Admin key it prints, in the same transaction (`inSameTransaction`). Does nothing when any organization exists. The insert is guarded
 * by `WHERE NOT EXISTS` so that two processes starting on one empty store create it once.
 */
export async function ensureDefaultOrganization(db: Db, inSameTransaction?: (tx: Tx, created: { orgId: string; ownerUserId: string }) => Promise<void>): Promise<BootstrapResult> {
  return db.transaction(async (tx) => {
    // Serializes concurrent first starts on PostgreSQL; the lock ends with the transaction.
    await tx.query('LOCK TABLE organizations IN SHARE ROW EXCLUSIVE MODE')
    const orgId = uuidv7()
    const inserted = await tx.query(
      `INSERT INTO organizations (id, key, name) SELECT $1, $2, $3
       WHERE NOT EXISTS (SELECT 1 FROM organizations)`,
      [orgId, DEFAULT_ORGANIZATION.key, DEFAULT_ORGANIZATION.name],
    )
    if (inserted.rowCount === 0) return { created: false }
    const ownerUserId = uuidv7()
    await tx.query(
      `INSERT INTO users (org_id, id, email, name, permission_type, role_keys, enabled, sign_in_methods)
       VALUES ($1, $2, $3, $4, 'Owner', $5::text[], true, $6::text[])`,
      [orgId, ownerUserId, DEFAULT_OWNER.email, DEFAULT_OWNER.name, [DEFAULT_ROLE.key], ['password']],
    )
    await tx.query('INSERT INTO roles (org_id, key, name, grants) VALUES ($1, $2, $3, $4::jsonb)', [
      orgId, DEFAULT_ROLE.key, DEFAULT_ROLE.name, JSON.stringify(DEFAULT_ROLE.grants),
    ])
    // What the caller adds (the Admin key) commits with the organization or not at all: a start
    // killed between the two left an organization without any key, and no later start makes one.
    await inSameTransaction?.(tx, { orgId, ownerUserId })
    return { created: true, orgId, ownerUserId }
  })
}
