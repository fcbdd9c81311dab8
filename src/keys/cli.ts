import type { Db } from '../store/db.js'
import { AppError } from '../core/errors.js'
import { storeNewKey } from './create.js'
import { operatorOrigin } from '../outbox/write.js'
import { checkRoles } from './service.js'
import { deleteApiKey, selectApiKey, selectApiKeyByPrefix, selectKeyOwner, selectKeysWithOwners, selectOrgIdByKey } from './sql.js'
import { toApiKeyRecord, type ApiKeyRecord } from './mapper.js'
import { INVALIDATE_CHANNEL } from '../core/channels.js'
import { isUuid } from '../core/time.js'
import { prefixOfTokenStart } from '../core/auth/tokens.js'
import type { Queryable } from '../store/db.js'
import { KEY_DESCRIPTION_MAX_LENGTH, KEY_NAME_MAX_LENGTH } from './limits.js'

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

/** `--<option>: at most n characters, got m`, counted as JSON Schema's maxLength counts (code points). */
function tooLong(option: string, text: string | undefined, max: number): string | null {
  const length = text === undefined ? 0 : [...text].length
  return length > max ? `--${option}: at most ${max} characters, got ${length}` : null
}

/** The checks of `kbis keys create`'s options that need no store: made before it is opened. */
export function checkKeyRequest(req: CliKeyRequest): void {
  if (!(TYPES as readonly string[]).includes(req.type)) throw new CommandError(`--type: must be one of ${TYPES.join(', ')}, got "${req.type}"`)
  if (req.roles.length === 0) throw new CommandError('--roles: name at least one role')
  // POST /api-keys refuses a role named twice (its schema's uniqueItems): so does the CLI.
  const twice = req.roles.find((role, index) => req.roles.indexOf(role) !== index)
  if (twice !== undefined) throw new CommandError(`--roles: names the role ${twice} twice`)
  if (req.name.trim() === '') throw new CommandError('--name: must not be empty')
  // The lengths POST /api-keys takes: the CLI makes no key the API would refuse.
  const long = tooLong('name', req.name, KEY_NAME_MAX_LENGTH) ?? tooLong('description', req.description, KEY_DESCRIPTION_MAX_LENGTH)
  if (long) throw new CommandError(long)
}

/** `kbis keys create`: the operator creates a key for a user, by organization key and email. */
export async function createKeyFromCli(db: Db, req: CliKeyRequest): Promise<{ id: string; secret: string }> {
  checkKeyRequest(req)
  const result = await db.transaction(async (tx) => {
    const orgId = await orgIdOf(tx, req.org)
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

async function orgIdOf(db: Queryable, org: string): Promise<string> {
  const orgId = await selectOrgIdByKey(db, org)
  if (orgId === null) throw new CommandError(`--org: no organization ${org}`)
  return orgId
}

/** A key as `kbis keys list` shows it: the API's record and its owner's email. */
export type CliKeyRecord = ApiKeyRecord & { owner_email: string }

/** `kbis keys list`: every key of the organization, oldest first, as GET /api-keys shows them to an Admin. */
export async function listKeysFromCli(db: Db, req: { org: string }): Promise<CliKeyRecord[]> {
  const rows = await selectKeysWithOwners(db, await orgIdOf(db, req.org))
  return rows.map((row) => ({ ...toApiKeyRecord(row), owner_email: row.owner_email }))
}

/** The key `kbis keys revoke` names: a token's prefix (12 hex digits), or null for an id; checked before the store is opened. */
export function revokedKeyPrefix(key: string): string | null {
  const prefix = prefixOfTokenStart(key)
  // A mistyped token may hold most of a secret: past the start that keys list shows, it is not repeated.
  const shown = key.startsWith('kbis_') && key.length > 17 ? `${key.slice(0, 17)}…` : key.length > 40 ? `${key.slice(0, 40)}…` : key
  if (prefix === null && !isUuid(key)) throw new CommandError(`<key>: give the key's id or the start of its token (kbis_ and 12 hex digits), not "${shown}"`)
  return prefix
}

/**
 * `kbis keys revoke`: deletes a key for good, as DELETE /api-keys/{id} does (event `api_key.deleted`,
 * every server drops its cached copy at once). Named by its id or by the start of its token, which
 * is what an operator holds when a token has leaked.
 */
export async function revokeKeyFromCli(db: Db, req: { org: string; key: string }): Promise<{ id: string; name: string; secret_prefix: string }> {
  const prefix = revokedKeyPrefix(req.key)
  const result = await db.transaction(async (tx) => {
    const orgId = await orgIdOf(tx, req.org)
    const row = prefix !== null ? await selectApiKeyByPrefix(tx, orgId, prefix) : await selectApiKey(tx, orgId, req.key, true)
    if (row === null) throw new CommandError(`<key>: no API key ${prefix !== null ? `kbis_${prefix}` : req.key} in organization ${req.org}`)
    await deleteApiKey(tx, operatorOrigin(orgId), row.id)
    return { orgId, record: toApiKeyRecord(row) }
  })
  await db.notify(INVALIDATE_CHANNEL, result.orgId)
  return { id: result.record.id, name: result.record.name, secret_prefix: result.record.secret_prefix }
}
