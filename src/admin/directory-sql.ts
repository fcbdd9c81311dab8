import type { Queryable } from '../store/db.js'
import { Params, selectPage } from '../store/sql.js'
import type { Grant } from '../core/auth/levels.js'

export interface RoleRow {
  key: string
  name: string
  description: string | null
  grants: Grant[]
}

export interface AccessDomainRow {
  key: string
  name: string
  description: string | null
}

export interface UserRow {
  id: string
  email: string
  name: string
  permission_type: 'Viewer' | 'Editor' | 'Admin' | 'Owner'
  role_keys: string[]
  enabled: boolean
  sign_in_methods: string[]
  created_at: Date
}

/** The three directory tables, their columns and their list order (all constants, never input). */
const TABLES = {
  roles: { columns: 'key, name, description, grants', order: 'key COLLATE "C"', id: 'key' },
  access_domains: { columns: 'key, name, description', order: 'key COLLATE "C"', id: 'key' },
  users: {
    columns: 'id, email, name, permission_type, role_keys, enabled, sign_in_methods, created_at',
    order: 'created_at, id',
    id: 'id',
  },
} as const

export type DirectoryTable = keyof typeof TABLES

export interface DirectoryRows {
  roles: RoleRow
  access_domains: AccessDomainRow
  users: UserRow
}

/** One page of a directory table of the organization, plus the total (two statements, in parallel). */
export async function selectDirectoryPage<T extends DirectoryTable>(
  db: Queryable,
  table: T,
  orgId: string,
  limit: number,
  offset: number,
): Promise<{ rows: DirectoryRows[T][]; total: number }> {
  const t = TABLES[table]
  return selectPage<DirectoryRows[T]>(db, { select: t.columns, from: table }, { where: 'org_id = $1', orderBy: t.order, limit, offset, params: new Params([orgId]) })
}

/** One row by its key (roles, access domains) or id (users). Callers check a user id is a UUID. */
export async function selectDirectoryRow<T extends DirectoryTable>(
  db: Queryable,
  table: T,
  orgId: string,
  id: string,
): Promise<DirectoryRows[T] | null> {
  const t = TABLES[table]
  const result = await db.query<DirectoryRows[T]>(`SELECT ${t.columns} FROM ${table} WHERE org_id = $1 AND ${t.id} = $2`, [orgId, id])
  return result.rows[0] ?? null
}
