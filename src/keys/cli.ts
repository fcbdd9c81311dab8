import type { Db } from '../store/db.js'
import { storeNewKey } from './create.js'
import { operatorOrigin } from '../events/write.js'
import { INVALIDATE_CHANNEL } from '../core/channels.js'

export class CommandError extends Error {}

export interface CliKeyRequest {
  org: string
  user: string
  name: string
  type: string
  roles: string[]
  description?: string | undefined
}

const TYPES = ['Viewer', 'Editor', 'Admin'] as const

/** `kbis keys create`: the operator creates a key for a user, by organization key and email. */
export async function createKeyFromCli(db: Db, req: CliKeyRequest): Promise<{ id: string; secret: string }> {
  if (!(TYPES as readonly string[]).includes(req.type)) throw new CommandError(`--type: must be one of ${TYPES.join(', ')}, got "${req.type}"`)
  if (req.roles.length === 0) throw new CommandError('--roles: name at least one role')
  if (req.name.trim() === '') throw new CommandError('--name: must not be empty')
  const result = await db.transaction(async (tx) => {
    const org = (await tx.query<{ id: string }>('SELECT id FROM organizations WHERE key = $1', [req.org])).rows[0]
    if (!org) throw new CommandError(`--org: no organization ${req.org}`)
    const user = (
      await tx.query<{ id: string; role_keys: string[] }>('SELECT id, role_keys FROM users WHERE org_id = $1 AND email = $2', [org.id, req.user])
    ).rows[0]
    if (!user) throw new CommandError(`--user: no user ${req.user} in organization ${req.org}`)
    const known = new Set(
      (await tx.query<{ key: string }>('SELECT key FROM roles WHERE org_id = $1 AND key = ANY($2::text[])', [org.id, req.roles])).rows.map((r) => r.key),
    )
    const unknown = req.roles.filter((r) => !known.has(r))
    if (unknown.length > 0) throw new CommandError(`--roles: no role ${unknown.join(', ')} in organization ${req.org}`)
    const lacking = req.roles.filter((r) => !user.role_keys.includes(r))
    if (lacking.length > 0) throw new CommandError(`--roles: user ${req.user} does not have the role ${lacking.join(', ')}`)
    const key = await storeNewKey(tx, operatorOrigin(org.id), {
      name: req.name,
      description: req.description ?? null,
      permission_type: req.type as (typeof TYPES)[number],
      role_keys: req.roles,
      owner_user_id: user.id,
    })
    return { id: key.id, secret: key.secret, orgId: org.id }
  })
  await db.notify(INVALIDATE_CHANNEL, result.orgId)
  return { id: result.id, secret: result.secret }
}
