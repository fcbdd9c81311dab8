/** Access levels of role grants, lowest first (CONTRACT §9). */
export const LEVELS = ['view', 'edit', 'delete', 'edit_access_domain'] as const
export type Level = (typeof LEVELS)[number]

export function levelRank(level: Level): number {
  return LEVELS.indexOf(level)
}

export interface Grant {
  /** A domain key, null (assets with no access domain) or "*" (every domain and none). */
  access_domain_key: string | null
  /** ["*"] or a list of asset type keys. */
  asset_type_keys: string[]
  level: Level
}
