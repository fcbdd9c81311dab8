import type { Tx } from '../store/db.js'
import type { Level } from '../core/auth/levels.js'
import type {
  AccessDomainSpec, AssetTypeSpec, GrantSpec, OrganizationSpec, PropertySpec, RelationshipTypeSpec, RoleSpec, UserSpec,
} from './types.js'

export interface StoredOrganization extends OrganizationSpec {
  id: string
}

export interface StoredUser extends UserSpec {
  id: string
}

/** An organization's set-up as stored, keyed by key (users by email), in stored order. */
export interface OrgState {
  accessDomains: Map<string, AccessDomainSpec>
  roles: Map<string, RoleSpec>
  assetTypes: Map<string, AssetTypeSpec>
  relationshipTypes: Map<string, RelationshipTypeSpec>
  /** Stored `position` of asset types (`server`), properties (`server.hostname`), relationship types (`~runs_on`). */
  positions: Map<string, number>
}

export const positionKey = {
  assetType: (type: string): string => type,
  property: (type: string, property: string): string => `${type}.${property}`,
  relationshipType: (type: string): string => `~${type}`,
}

interface OrganizationRow {
  id: string
  key: string
  name: string
  api_access: boolean
  rate_limit_requests: number
  rate_limit_window_seconds: number
  ip_allowlist: string[]
}

/** The organization, locked until the transaction ends so that two applies run one after the other. */
export async function lockOrganization(tx: Tx, key: string): Promise<StoredOrganization | null> {
  const row = (
    await tx.query<OrganizationRow>(
      `SELECT id, key, name, api_access, rate_limit_requests, rate_limit_window_seconds, ip_allowlist
       FROM organizations WHERE key = $1 FOR UPDATE`,
      [key],
    )
  ).rows[0]
  if (!row) return null
  return {
    id: row.id,
    key: row.key,
    name: row.name,
    api_access: row.api_access,
    rate_limit: { requests: row.rate_limit_requests, window_seconds: row.rate_limit_window_seconds },
    ip_allowlist: row.ip_allowlist,
  }
}

/** Grants as stored (jsonb reorders object keys) → the shape of the file, for comparison. */
function grant(raw: Record<string, unknown>): GrantSpec {
  return {
    access_domain_key: (raw.access_domain_key ?? null) as string | null,
    asset_type_keys: (raw.asset_type_keys ?? []) as string[],
    level: raw.level as Level,
  }
}

async function selectRoles(tx: Tx, orgId: string): Promise<RoleSpec[]> {
  const rows = (
    await tx.query<{ key: string; name: string; description: string | null; grants: Record<string, unknown>[] }>(
      'SELECT key, name, description, grants FROM roles WHERE org_id = $1 ORDER BY key',
      [orgId],
    )
  ).rows
  return rows.map((r) => ({ key: r.key, name: r.name, description: r.description, grants: r.grants.map(grant) }))
}

type Positioned<T> = T & { position: number }

async function selectAssetTypes(tx: Tx, orgId: string, positions: Map<string, number>): Promise<AssetTypeSpec[]> {
  const types = (
    await tx.query<Positioned<Omit<AssetTypeSpec, 'properties'>>>(
      'SELECT key, name, description, position FROM asset_types WHERE org_id = $1 ORDER BY position, key',
      [orgId],
    )
  ).rows
  const props = (
    await tx.query<Positioned<PropertySpec> & { asset_type_key: string }>(
      `SELECT asset_type_key, key, name, description, type, required, options, currency, min, max, position
       FROM property_definitions WHERE org_id = $1 ORDER BY position, key`,
      [orgId],
    )
  ).rows
  for (const t of types) positions.set(positionKey.assetType(t.key), t.position)
  for (const p of props) positions.set(positionKey.property(p.asset_type_key, p.key), p.position)
  return types.map(({ position: _, ...t }) => ({
    ...t,
    properties: props.filter((p) => p.asset_type_key === t.key).map(({ asset_type_key: _t, position: _p, ...p }) => p),
  }))
}

export async function loadState(tx: Tx, orgId: string): Promise<OrgState> {
  const domains = (
    await tx.query<AccessDomainSpec>('SELECT key, name, description FROM access_domains WHERE org_id = $1 ORDER BY key', [orgId])
  ).rows
  const relationshipTypes = (
    await tx.query<Positioned<RelationshipTypeSpec>>(
      `SELECT key, name, description, source_asset_type_keys, target_asset_type_keys, position
       FROM relationship_types WHERE org_id = $1 ORDER BY position, key`,
      [orgId],
    )
  ).rows
  const positions = new Map<string, number>()
  for (const t of relationshipTypes) positions.set(positionKey.relationshipType(t.key), t.position)
  const byKey = <T extends { key: string }>(items: T[]): Map<string, T> => new Map(items.map((i) => [i.key, i]))
  return {
    accessDomains: byKey(domains),
    roles: byKey(await selectRoles(tx, orgId)),
    assetTypes: byKey(await selectAssetTypes(tx, orgId, positions)),
    relationshipTypes: byKey(relationshipTypes.map(({ position: _, ...t }) => t)),
    positions,
  }
}

/** The users the file names, by email. Users it does not name are never read nor changed. */
export async function selectUsers(tx: Tx, orgId: string, emails: string[]): Promise<Map<string, StoredUser>> {
  const rows = (
    await tx.query<StoredUser>(
      `SELECT id, email, name, permission_type, role_keys, enabled, sign_in_methods
       FROM users WHERE org_id = $1 AND email = ANY($2::text[])`,
      [orgId, emails],
    )
  ).rows
  return new Map(rows.map((u) => [u.email, u]))
}
