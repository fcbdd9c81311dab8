import type { Queryable } from '../store/db.js'
import { generateToken } from '../core/auth/tokens.js'
import { newId } from '../core/time.js'
import { insertApiKey } from './sql.js'
import type { EventOrigin } from '../outbox/write.js'
import { toApiKeyRecord, type ApiKeyRecord } from './mapper.js'

export interface KeySpec {
  name: string
  description?: string | null
  permission_type: 'Viewer' | 'Editor' | 'Admin'
  role_keys: string[]
  owner_user_id: string
}

/**
 * Stores a new key and returns its record with the secret, which exists only in this return
 * value: the store keeps its hash. Callers have checked the owner and the ceilings already.
 */
export async function storeNewKey(tx: Queryable, origin: EventOrigin, spec: KeySpec): Promise<ApiKeyRecord & { secret: string }> {
  const token = generateToken()
  const row = await insertApiKey(tx, origin, {
    id: newId(),
    name: spec.name,
    description: spec.description ?? null,
    permission_type: spec.permission_type,
    role_keys: spec.role_keys,
    owner_user_id: spec.owner_user_id,
    secret_prefix: token.prefix,
    secret_hash: token.hash,
  })
  return { ...toApiKeyRecord(row), secret: token.token }
}
