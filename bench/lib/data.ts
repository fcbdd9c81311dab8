/** The bench organizations and realistic rows (the same generator feeds ours and raw SQL). */

const SERVER_PROPERTIES = [
  { key: 'hostname', name: 'Hostname', type: 'unique_key', required: true },
  { key: 'environment', name: 'Environment', type: 'select', options: ['dev', 'staging', 'prod'] },
  { key: 'cpu_count', name: 'CPUs', type: 'integer', min: 1 },
  { key: 'memory_gb', name: 'Memory (GB)', type: 'number' },
  { key: 'purchased_on', name: 'Purchased on', type: 'date' },
  { key: 'tags', name: 'Tags', type: 'multi_select', options: ['pci', 'gdpr', 'legacy', 'dmz'] },
  { key: 'owner', name: 'Owner', type: 'text' },
  { key: 'cost', name: 'Cost', type: 'currency', currency: 'EUR' },
  { key: 'notes', name: 'Notes', type: 'long_text' },
]

/** An organization as `kbis apply` takes it, with a rate limit no bench run reaches. */
export function benchSetup(key: string): Record<string, unknown> {
  return {
    organization: { key, name: `Bench ${key}`, api_access: true, rate_limit: { requests: 100_000_000, window_seconds: 60 }, ip_allowlist: [] },
    access_domains: [{ key: 'it', name: 'IT' }, { key: 'finance', name: 'Finance' }],
    roles: [{ key: 'all', name: 'Everything', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] }],
    users: [{ email: `owner@${key}.test`, name: 'Owner', permission_type: 'Owner', role_keys: ['all'], enabled: true, sign_in_methods: ['password'] }],
    metamodel: {
      asset_types: [
        { key: 'server', name: 'Server', properties: SERVER_PROPERTIES },
        { key: 'application', name: 'Application', properties: [{ key: 'code', name: 'Code', type: 'unique_key', required: true }] },
      ],
      relationship_types: [{ key: 'runs_on', name: 'Runs on', source_asset_type_keys: ['application'], target_asset_type_keys: ['server'] }],
    },
  }
}

export interface ServerItem {
  asset_type_key: 'server'
  name: string
  access_domain_key: string
  client_ref: string
  properties: Record<string, unknown>
}

const ENVIRONMENTS = ['dev', 'staging', 'prod']
const CPUS = [2, 4, 8, 16, 32, 64]
const MEMORY = [4, 8, 16, 24.5, 32, 64, 128]
const TAGS = [['pci'], ['gdpr'], ['pci', 'gdpr'], [], ['legacy'], ['dmz', 'pci']]
const TEAMS = ['platform', 'payments', 'search', 'identity', 'data']

/** Server `i` of batch `batch`: 8 properties with varied, plausible values. */
export function serverItem(batch: string, i: number): ServerItem {
  const n = String(i).padStart(6, '0')
  const day = 1 + (i % 28)
  return {
    asset_type_key: 'server',
    name: `${batch}-srv-${n}.dc${1 + (i % 3)}.example.internal`,
    access_domain_key: i % 5 === 0 ? 'finance' : 'it',
    client_ref: `${batch}-${i}`,
    properties: {
      hostname: `${batch}-srv-${n}`,
      environment: ENVIRONMENTS[i % 3],
      cpu_count: CPUS[i % CPUS.length],
      memory_gb: MEMORY[i % MEMORY.length],
      purchased_on: `20${18 + (i % 7)}-${String(1 + (i % 12)).padStart(2, '0')}-${String(day).padStart(2, '0')}`,
      tags: TAGS[i % TAGS.length],
      owner: `team-${TEAMS[i % TEAMS.length]}@example.com`,
      cost: Math.round((800 + ((i * 37) % 9000)) * 100) / 100 + 0.5,
    },
  }
}

export function serverBatch(batch: string, count = 10_000): ServerItem[] {
  return Array.from({ length: count }, (_, i) => serverItem(batch, i))
}

/** The 2-property change of bulk update run `run` for server `i`. */
export function serverChange(run: number, i: number): Record<string, unknown> {
  return { environment: ENVIRONMENTS[(i + run + 1) % 3], cpu_count: CPUS[(i + run + 1) % CPUS.length] }
}

/** The nested search of the benchmark (issue 4's query (a), issue 15's "nested AND/OR search"). */
export const SEARCH_FILTER = {
  or: [
    { and: [{ field: 'properties.environment', operator: 'equals', value: 'prod' }, { field: 'properties.cpu_count', operator: 'greater_than_or_equals', value: 16 }] },
    { and: [{ field: 'properties.tags', operator: 'includes', value: 'pci' }, { field: 'name', operator: 'starts_with', value: 'db-' }] },
  ],
}

/** Analytics bodies: (b) count + average(memory_gb) by environment, (c) count_distinct(owner). */
export const GROUP_BY_BODY = { measures: [{ type: 'count' }, { type: 'average', field: 'properties.memory_gb' }], group_by: ['properties.environment'] }
export const DISTINCT_BODY = { measures: [{ type: 'count_distinct', field: 'properties.owner' }] }
