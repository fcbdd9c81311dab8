import type { Level } from '../core/auth/levels.js'
import type { PropertyDefinition } from '../metamodel/types.js'

/**
 * A set-up file after validation, with every default filled in. Optional sections are absent
 * when the file does not list them: absent sections are left untouched by `applySetup`.
 */
export interface SetupFile {
  /** Where it came from (a file name); prefixes every error message. */
  source?: string | undefined
  organization: OrganizationSpec
  access_domains?: AccessDomainSpec[] | undefined
  roles?: RoleSpec[] | undefined
  users?: UserSpec[] | undefined
  metamodel?: MetamodelSpec | undefined
}

export interface OrganizationSpec {
  key: string
  name: string
  api_access: boolean
  rate_limit: { requests: number; window_seconds: number }
  ip_allowlist: string[]
}

export interface AccessDomainSpec {
  key: string
  name: string
  description: string | null
}

export interface GrantSpec {
  access_domain_key: string | null
  asset_type_keys: string[]
  level: Level
}

export interface RoleSpec {
  key: string
  name: string
  description: string | null
  grants: GrantSpec[]
}

export const USER_PERMISSION_TYPES = ['Viewer', 'Editor', 'Admin', 'Owner'] as const
export type UserPermissionType = (typeof USER_PERMISSION_TYPES)[number]

export interface UserSpec {
  email: string
  name: string
  permission_type: UserPermissionType
  role_keys: string[]
  enabled: boolean
  sign_in_methods: string[]
}

export interface MetamodelSpec {
  asset_types?: AssetTypeSpec[] | undefined
  relationship_types?: RelationshipTypeSpec[] | undefined
}

export interface AssetTypeSpec {
  key: string
  name: string
  description: string | null
  properties: PropertySpec[]
}

/** A property as the set-up file declares it: the API's property definition, inside its asset type. */
export type PropertySpec = Omit<PropertyDefinition, 'asset_type_key'>

export interface RelationshipTypeSpec {
  key: string
  name: string
  description: string | null
  source_asset_type_keys: string[]
  target_asset_type_keys: string[]
}

export interface ApplyReport {
  organization: { key: string; id: string; created: boolean }
  /** Human-readable lines, e.g. "asset type server: created"; empty when nothing changed. */
  changes: string[]
  /** What was applied but deserves a look, e.g. a relationship type naming an undefined asset type. */
  warnings: string[]
}

/** A set-up file that cannot be loaded or applied. The message is one line, ready to print. */
export class SetupError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SetupError'
  }
}

/** Prefixes a message with the file it is about, when known. */
export function withSource(source: string | undefined, message: string): string {
  return source ? `${source}: ${message}` : message
}
