import type { Db } from '../store/db.js'
import { AppError } from '../core/errors.js'
import { storeNewKey } from './create.js'
import { operatorOrigin } from '../outbox/write.js'
import { checkRoles } from './service.js'
import { selectKeyOwner, selectOrgIdByKey } from './sql.js'
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
    const orgId = await selectOrgIdByKey(tx, req.org)
    if (orgId === null) throw new CommandError(`--org: no organization ${req.org}`)
    const user = await selectKeyOwner(tx, orgId, { email: req.user })
    if (!user) throw new CommandError(`--user: no user ${req.user} in organization ${req.org}`)
    // The same role rules as POST /api-keys (keys/service.ts); the operator has no calling key.
    await checkRoles(tx, orgId, req.roles, user, null).catch((err: unknown) => {
      if (err instanceof AppError) throw new CommandError(`--roles: ${err.issues.map((i) => i.detail).join('; ')}`)
      throw err
    })
    const key = await storeNewKey(tx, operatorOrigin(orgId), {
      name: req.name,
      description: req.description ?? null,
      permission_type: req.type as (typeof TYPES)[number],
      role_keys: req.roles,
      owner_user_id: user.id,
    })
    return { id: key.id, secret: key.secret, orgId }
  })
  await db.notify(INVALIDATE_CHANNEL, result.orgId)
  return { id: result.id, secret: result.secret }
}
