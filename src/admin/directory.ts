import { AppError, Errors } from '../core/errors.js'
import type { AuthContext } from '../core/auth/context.js'
import type { Db } from '../store/db.js'
import { isoSecond, isUuid } from '../core/time.js'
import { offsetOf, pageMeta, type Page, type PageMeta } from '../core/pagination.js'
import type { Grant } from '../core/auth/levels.js'
import { selectDirectoryPage, selectDirectoryRow, type AccessDomainRow, type RoleRow, type UserRow } from './directory-sql.js'

/** What the admin services need of a request (they never see `request` itself). */
export interface AdminContext {
  db: Db
  auth: AuthContext
  /** For the events of key changes (CONTRACT §13). */
  requestId?: string
  idempotencyKey?: string
}

export interface RoleRecord {
  key: string
  name: string
  description: string | null
  grants: Grant[]
}

export interface AccessDomainRecord {
  key: string
  name: string
  description: string | null
}

export interface UserRecord {
  id: string
  email: string
  name: string
  permission_type: string
  role_keys: string[]
  enabled: boolean
  sign_in_methods: string[]
  created_at: string
}

export interface PageOf<T> {
  data: T[]
  page: PageMeta
}

function toRole(row: RoleRow): RoleRecord {
  const grants = (row.grants ?? []).map((g) => ({ access_domain_key: g.access_domain_key, asset_type_keys: g.asset_type_keys, level: g.level }))
  return { key: row.key, name: row.name, description: row.description, grants }
}

function toAccessDomain(row: AccessDomainRow): AccessDomainRecord {
  return { key: row.key, name: row.name, description: row.description }
}

function toUser(row: UserRow): UserRecord {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    permission_type: row.permission_type,
    role_keys: row.role_keys,
    enabled: row.enabled,
    sign_in_methods: row.sign_in_methods,
    created_at: isoSecond(row.created_at)!,
  }
}

/** Users (emails, sign-in methods) are for administrators only (CONTRACT §9). */
function requireAdmin(auth: AuthContext): void {
  if (auth.permission !== 'Admin') {
    throw new AppError(Errors.FORBIDDEN, `reading users requires the Admin permission; the key acts as ${auth.permission}`)
  }
}

// Roles and access domains are readable by every key: a Viewer needs the domain keys to read its
// assets' access_domain_key, and an Editor needs the roles to create its own keys.

export async function listRoles(ctx: AdminContext, page: Page): Promise<PageOf<RoleRecord>> {
  const { rows, total } = await selectDirectoryPage(ctx.db, 'roles', ctx.auth.orgId, page.size, offsetOf(page))
  return { data: rows.map(toRole), page: pageMeta(page, total) }
}

export async function getRole(ctx: AdminContext, key: string): Promise<RoleRecord> {
  const row = await selectDirectoryRow(ctx.db, 'roles', ctx.auth.orgId, key)
  if (!row) throw new AppError(Errors.NOT_FOUND, `role ${key} not found`)
  return toRole(row)
}

export async function listAccessDomains(ctx: AdminContext, page: Page): Promise<PageOf<AccessDomainRecord>> {
  const { rows, total } = await selectDirectoryPage(ctx.db, 'access_domains', ctx.auth.orgId, page.size, offsetOf(page))
  return { data: rows.map(toAccessDomain), page: pageMeta(page, total) }
}

export async function getAccessDomain(ctx: AdminContext, key: string): Promise<AccessDomainRecord> {
  const row = await selectDirectoryRow(ctx.db, 'access_domains', ctx.auth.orgId, key)
  if (!row) throw new AppError(Errors.NOT_FOUND, `access domain ${key} not found`)
  return toAccessDomain(row)
}

export async function listUsers(ctx: AdminContext, page: Page): Promise<PageOf<UserRecord>> {
  requireAdmin(ctx.auth)
  const { rows, total } = await selectDirectoryPage(ctx.db, 'users', ctx.auth.orgId, page.size, offsetOf(page))
  return { data: rows.map(toUser), page: pageMeta(page, total) }
}

export async function getUser(ctx: AdminContext, id: string): Promise<UserRecord> {
  requireAdmin(ctx.auth)
  const row = isUuid(id) ? await selectDirectoryRow(ctx.db, 'users', ctx.auth.orgId, id) : null
  if (!row) throw new AppError(Errors.NOT_FOUND, `user ${id} not found`)
  return toUser(row)
}
