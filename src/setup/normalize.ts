import type { PropertyType } from '../metamodel/types.js'
import type {
  AccessDomainSpec, AssetTypeSpec, GrantSpec, OrganizationSpec, PropertySpec, RelationshipTypeSpec, RoleSpec,
  SetupFile, UserSpec,
} from './types.js'

/** Defaults of CONTRACT §10. */
export const DEFAULT_RATE_LIMIT = { requests: 6000, window_seconds: 60 }
/** A score is an integer in min..max, 0..5 unless the file says otherwise (CONTRACT §8). */
export const DEFAULT_SCORE_BOUNDS = { min: 0, max: 5 }

// The input has passed the JSON Schema: only its shape is known, so fields are read loosely.
type Raw = Record<string, any>

function named(raw: Raw): { key: string; name: string; description: string | null } {
  return { key: raw.key, name: raw.name ?? raw.key, description: raw.description ?? null }
}

function organization(raw: Raw): OrganizationSpec {
  return {
    key: raw.key,
    name: raw.name ?? raw.key,
    api_access: raw.api_access ?? true,
    rate_limit: {
      requests: raw.rate_limit?.requests ?? DEFAULT_RATE_LIMIT.requests,
      window_seconds: raw.rate_limit?.window_seconds ?? DEFAULT_RATE_LIMIT.window_seconds,
    },
    ip_allowlist: raw.ip_allowlist ?? [],
  }
}

function grant(raw: Raw): GrantSpec {
  return { access_domain_key: raw.access_domain_key, asset_type_keys: raw.asset_type_keys, level: raw.level }
}

function role(raw: Raw): RoleSpec {
  return { ...named(raw), grants: (raw.grants as Raw[]).map(grant) }
}

function user(raw: Raw): UserSpec {
  return {
    email: raw.email,
    name: raw.name,
    permission_type: raw.permission_type,
    role_keys: raw.role_keys ?? [],
    enabled: raw.enabled ?? true,
    sign_in_methods: raw.sign_in_methods ?? [],
  }
}

/** Fills what the file omits, except score bounds (checks must still see what was written). */
function property(raw: Raw): PropertySpec {
  return {
    ...named(raw),
    type: raw.type as PropertyType,
    required: raw.required ?? false,
    options: raw.options ?? null,
    currency: raw.currency ?? null,
    min: raw.min ?? null,
    max: raw.max ?? null,
  }
}

function assetType(raw: Raw): AssetTypeSpec {
  return { ...named(raw), properties: ((raw.properties ?? []) as Raw[]).map(property) }
}

function relationshipType(raw: Raw): RelationshipTypeSpec {
  return {
    ...named(raw),
    source_asset_type_keys: raw.source_asset_type_keys ?? [],
    target_asset_type_keys: raw.target_asset_type_keys ?? [],
  }
}

/** Raw (schema-valid) file → SetupFile. Sections the file does not list stay absent. */
export function normalizeSetup(raw: Raw, source?: string): SetupFile {
  const setup: SetupFile = { organization: organization(raw.organization) }
  if (source !== undefined) setup.source = source
  if (raw.access_domains) setup.access_domains = (raw.access_domains as Raw[]).map((d): AccessDomainSpec => named(d))
  if (raw.roles) setup.roles = (raw.roles as Raw[]).map(role)
  if (raw.users) setup.users = (raw.users as Raw[]).map(user)
  if (raw.metamodel) {
    setup.metamodel = {}
    if (raw.metamodel.asset_types) setup.metamodel.asset_types = (raw.metamodel.asset_types as Raw[]).map(assetType)
    if (raw.metamodel.relationship_types) {
      setup.metamodel.relationship_types = (raw.metamodel.relationship_types as Raw[]).map(relationshipType)
    }
  }
  return setup
}

/** Score bounds default to 0..5; stored explicitly so the metamodel API shows them. */
export function fillScoreBounds(setup: SetupFile): void {
  for (const type of setup.metamodel?.asset_types ?? []) {
    for (const p of type.properties) {
      if (p.type !== 'score') continue
      p.min ??= DEFAULT_SCORE_BOUNDS.min
      p.max ??= DEFAULT_SCORE_BOUNDS.max
    }
  }
}
