/** The organization most HTTP suites start from (CONTRACT §12's example, with every property type). */
export const ACME = {
  organization: { key: 'acme', name: 'Acme', api_access: true, rate_limit: { requests: 100000, window_seconds: 60 }, ip_allowlist: [] },
  access_domains: [
    { key: 'it', name: 'IT' },
    { key: 'finance', name: 'Finance' },
  ],
  roles: [
    { key: 'all', name: 'Everything', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] },
    {
      key: 'it_editor',
      name: 'IT editor',
      grants: [
        { access_domain_key: 'it', asset_type_keys: ['*'], level: 'delete' },
        { access_domain_key: 'finance', asset_type_keys: ['server'], level: 'view' },
      ],
    },
  ],
  users: [
    { email: 'owner@acme.test', name: 'Owner', permission_type: 'Owner', role_keys: ['all', 'it_editor'], enabled: true, sign_in_methods: ['password'] },
    { email: 'editor@acme.test', name: 'Editor', permission_type: 'Editor', role_keys: ['it_editor'], enabled: true, sign_in_methods: ['password'] },
    { email: 'viewer@acme.test', name: 'Viewer', permission_type: 'Viewer', role_keys: ['all'], enabled: true, sign_in_methods: ['sso'] },
  ],
  metamodel: {
    asset_types: [
      {
        key: 'server',
        name: 'Server',
        properties: [
          { key: 'hostname', name: 'Hostname', type: 'unique_key', required: true },
          { key: 'environment', type: 'select', options: ['dev', 'staging', 'prod'] },
          { key: 'cpu_count', type: 'integer', min: 1 },
          { key: 'memory_gb', type: 'number' },
          { key: 'purchased_on', type: 'date' },
          { key: 'tags', type: 'multi_select', options: ['pci', 'gdpr', 'legacy'] },
          { key: 'managed', type: 'boolean' },
          { key: 'owner', type: 'text' },
          { key: 'cost', type: 'number' },
          { key: 'uptime', type: 'percentage' },
          { key: 'rating', type: 'score' },
          { key: 'homepage', type: 'url' },
          { key: 'notes', type: 'long_text' },
          { key: 'summary', type: 'rich_text' },
          { key: 'price', type: 'currency', currency: 'EUR' },
        ],
      },
      {
        key: 'application',
        name: 'Application',
        properties: [
          { key: 'code', type: 'unique_key', required: true },
          { key: 'owner', type: 'text' },
          { key: 'tier', type: 'select', options: ['gold', 'silver', 'bronze'] },
        ],
      },
      { key: 'note', name: 'Note', properties: [{ key: 'body', type: 'text' }] },
    ],
    relationship_types: [
      { key: 'runs_on', name: 'Runs on', source_asset_type_keys: ['application'], target_asset_type_keys: ['server'] },
      { key: 'depends_on', name: 'Depends on', source_asset_type_keys: [], target_asset_type_keys: [] },
    ],
  },
}
