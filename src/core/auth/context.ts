import type { Grant } from './levels.js'
import type { KeyPermission, UserPermission } from './permissions.js'

/** The caller's API key id; null for a console user, who acts without a key (core/auth/user.ts: keyId ''). */
export function callerKeyId(auth: { keyId: string | null }): string | null {
  return auth.keyId || null
}

/** Who is calling, resolved once per key and cached (see authenticate.ts). */
export interface AuthContext {
  orgId: string
  orgKey: string
  keyId: string
  userId: string
  keyPermission: KeyPermission
  ownerPermission: UserPermission
  /** min(key type, owner's type), Owner counting as Admin. */
  permission: KeyPermission
  roleKeys: string[]
  /** The grants of the key's roles, flattened. */
  grants: Grant[]
  rateLimit: { requests: number; windowSeconds: number }
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext
  }
}
