import type { FastifyRequest } from 'fastify'
import { AppError, Errors } from '../errors.js'

export type KeyPermission = 'Viewer' | 'Editor' | 'Admin'
export type UserPermission = KeyPermission | 'Owner'

const RANK: Record<UserPermission, number> = { Viewer: 1, Editor: 2, Admin: 3, Owner: 3 }

/** Effective permission = min(key type, owner's type), Owner counting as Admin (CONTRACT §9). */
export function effectivePermission(key: KeyPermission, owner: UserPermission): KeyPermission {
  const rank = Math.min(RANK[key], RANK[owner])
  return rank >= 3 ? 'Admin' : rank === 2 ? 'Editor' : 'Viewer'
}

export function permissionAtLeast(actual: UserPermission, needed: UserPermission): boolean {
  return RANK[actual] >= RANK[needed]
}

/** Route hook (preValidation): answers 403 forbidden when the key's effective permission is below `needed`. */
export function requirePermission(needed: KeyPermission) {
  return async (request: FastifyRequest): Promise<void> => {
    if (!permissionAtLeast(request.auth.permission, needed)) {
      throw new AppError(Errors.FORBIDDEN, `this requires the ${needed} permission; the key acts as ${request.auth.permission}`)
    }
  }
}
