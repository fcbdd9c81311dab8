import type { SetupFile } from './types.js'

/** Keys already in the store, for the sections a file does not list. */
export interface StoreKeys {
  accessDomains: ReadonlySet<string>
  assetTypes: ReadonlySet<string>
  roles: ReadonlySet<string>
}

interface Known {
  accessDomains: ReadonlySet<string> | null
  assetTypes: ReadonlySet<string> | null
  roles: ReadonlySet<string> | null
}

/**
 * What a name may refer to: the file's section when it lists one (that section replaces the
 * store's), else the store's keys, else (at load time, without a store) unknown: not checked.
 */
function known(setup: SetupFile, store: StoreKeys | null): Known {
  const keys = (items: { key: string }[] | undefined, stored: ReadonlySet<string> | undefined): ReadonlySet<string> | null =>
    items ? new Set(items.map((i) => i.key)) : stored ?? null
  return {
    accessDomains: keys(setup.access_domains, store?.accessDomains),
    assetTypes: keys(setup.metamodel?.asset_types, store?.assetTypes),
    roles: keys(setup.roles, store?.roles),
  }
}

function unknownIn(list: readonly string[], known: ReadonlySet<string> | null, path: string, what: string): string | null {
  if (!known) return null
  for (const [i, key] of list.entries()) {
    if (key !== '*' && !known.has(key)) return `${path}[${i}]: unknown ${what} ${key}`
  }
  return null
}

function roleGrants(setup: SetupFile, k: Known): string | null {
  for (const [r, role] of (setup.roles ?? []).entries()) {
    for (const [g, grant] of role.grants.entries()) {
      const path = `roles[${r}].grants[${g}]`
      const domain = grant.access_domain_key
      if (domain !== null && domain !== '*' && k.accessDomains && !k.accessDomains.has(domain)) {
        return `${path}.access_domain_key: unknown access domain ${domain}`
      }
      const found = unknownIn(grant.asset_type_keys, k.assetTypes, `${path}.asset_type_keys`, 'asset type')
      if (found) return found
    }
  }
  return null
}

function userRoles(setup: SetupFile, k: Known): string | null {
  for (const [u, user] of (setup.users ?? []).entries()) {
    const found = unknownIn(user.role_keys, k.roles, `users[${u}].role_keys`, 'role')
    if (found) return found
  }
  return null
}

/**
 * Relationship-type ends naming asset types the metamodel does not define: allowed (a type may be
 * declared before the asset types it links, as in the CONTRACT's own example), but no asset can
 * be at such an end until the type exists, so `kbis apply` warns about each one.
 */
export function undefinedEndTypes(setup: SetupFile, store: StoreKeys | null): string[] {
  const { assetTypes } = known(setup, store)
  if (!assetTypes) return []
  return (setup.metamodel?.relationship_types ?? []).flatMap((type, i) =>
    (['source', 'target'] as const).flatMap((end) =>
      type[`${end}_asset_type_keys`].flatMap((key, k) => assetTypes.has(key) ? [] : [
        `metamodel.relationship_types[${i}].${end}_asset_type_keys[${k}]: asset type ${key} is not defined; no asset can be the ${end} of a ${type.key} relationship until it is`,
      ])))
}

/**
 * Names in the file that point at nothing: grants on unknown access domains or asset types, users
 * with unknown roles. `store` is null at load time (only references into sections the file lists
 * are checked) and the store's keys when applying.
 */
export function checkReferences(setup: SetupFile, store: StoreKeys | null): string | null {
  const k = known(setup, store)
  return roleGrants(setup, k) ?? userRoles(setup, k)
}
