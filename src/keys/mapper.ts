import { isoSecond } from '../core/time.js'
import { TOKEN_PREFIX } from '../core/auth/tokens.js'
import type { ApiKeyRow } from './sql.js'

export interface ApiKeyRecord {
  id: string
  name: string
  description: string | null
  permission_type: string
  role_keys: string[]
  owner_user_id: string
  secret_prefix: string
  created_at: string
  updated_at: string
  last_used_at: string | null
  secret?: string
}

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    permission_type: row.permission_type,
    role_keys: row.role_keys,
    owner_user_id: row.owner_user_id,
    // As the secret is shown (CONTRACT §9): `kbis_<prefix>`, a prefix of the token itself.
    secret_prefix: `${TOKEN_PREFIX}${row.secret_prefix}`,
    created_at: isoSecond(row.created_at)!,
    updated_at: isoSecond(row.updated_at)!,
    last_used_at: isoSecond(row.last_used_at),
  }
}
