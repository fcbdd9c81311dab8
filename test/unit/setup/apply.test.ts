import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createTestStore, STORES, type TestStore } from '../../helpers/stores.js'
import { parseSetup } from '../../../src/setup/load.js'
import { apply, baseSetup, failure, givenApiKey, givenAsset, metamodelVersion, snapshot } from './helpers.js'

/** The example of CONTRACT §12, verbatim: its runs_on names the asset type application, which it does not define. */
const CONTRACT_EXAMPLE = `
organization: {key: acme, name: Acme, api_access: true, rate_limit: {requests: 6000, window_seconds: 60}, ip_allowlist: []}
access_domains: [{key: it, name: IT}, {key: finance, name: Finance}]
roles:
  - {key: all, name: Everything, grants: [{access_domain_key: "*", asset_type_keys: ["*"], level: edit_access_domain}]}
  - {key: it_editor, name: IT editor, grants: [{access_domain_key: it, asset_type_keys: ["*"], level: delete}, {access_domain_key: finance, asset_type_keys: [server], level: view}]}
users: [{email: owner@acme.test, name: Owner, permission_type: Owner, role_keys: [all], enabled: true, sign_in_methods: [password]}]
metamodel:
  asset_types:
    - key: server
      name: Server
      properties:
        - {key: hostname, name: Hostname, type: unique_key, required: true}
        - {key: environment, type: select, options: [dev, staging, prod]}
        - {key: purchased_on, type: date}
        - {key: tags, type: multi_select, options: [pci, gdpr, legacy]}
  relationship_types:
    - {key: runs_on, name: Runs on, source_asset_type_keys: [application], target_asset_type_keys: [server]}
`

for (const kind of STORES) {
  describe(`${kind}: applySetup`, () => {
    let store: TestStore
    beforeAll(async () => {
      store = await createTestStore(kind)
    })
    afterAll(async () => {
      await store.drop()
    })
    const rows = async (sql: string, orgId: string) => (await store.db.query(sql, [orgId])).rows

    it('creates the organization and everything the file lists', async () => {
      const report = await apply(store.db, baseSetup('create'))
      const orgId = report.organization.id
      expect(report).toEqual({
        organization: { key: 'create', id: orgId, created: true },
        changes: [
          'organization create: created',
          'access domain it: created', 'access domain finance: created',
          'asset type server: created', 'asset type application: created',
          'relationship type runs_on: created', 'relationship type depends_on: created',
          'role all: created', 'role it_editor: created',
          'user owner@acme.test: created', 'user editor@acme.test: created',
        ],
        warnings: [],
      })
      expect(await rows(`SELECT key, name, api_access, rate_limit_requests, rate_limit_window_seconds, ip_allowlist, metamodel_version
                         FROM organizations WHERE id = $1`, orgId)).toEqual([
        { key: 'create', name: 'Acme', api_access: true, rate_limit_requests: 6000, rate_limit_window_seconds: 60, ip_allowlist: [], metamodel_version: 1 },
      ])
      expect(await rows('SELECT key, name, description FROM access_domains WHERE org_id = $1 ORDER BY key', orgId)).toEqual([
        { key: 'finance', name: 'Finance', description: null }, { key: 'it', name: 'IT', description: null },
      ])
      expect(await rows('SELECT key, grants FROM roles WHERE org_id = $1 ORDER BY key', orgId)).toEqual([
        { key: 'all', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] },
        { key: 'it_editor', grants: [{ access_domain_key: 'it', asset_type_keys: ['server'], level: 'delete' }] },
      ])
      expect(await rows('SELECT email, name, permission_type, role_keys, enabled, sign_in_methods FROM users WHERE org_id = $1 ORDER BY email', orgId)).toEqual([
        { email: 'editor@acme.test', name: 'Editor', permission_type: 'Editor', role_keys: ['it_editor'], enabled: true, sign_in_methods: ['password'] },
        { email: 'owner@acme.test', name: 'Owner', permission_type: 'Owner', role_keys: ['all'], enabled: true, sign_in_methods: ['password'] },
      ])
      expect(await rows('SELECT key, name, position FROM asset_types WHERE org_id = $1 ORDER BY position', orgId)).toEqual([
        { key: 'server', name: 'Server', position: 0 }, { key: 'application', name: 'Application', position: 1 },
      ])
      expect(await rows(`SELECT asset_type_key, key, name, type, required, options, currency, min, max, position
                         FROM property_definitions WHERE org_id = $1 ORDER BY asset_type_key DESC, position`, orgId)).toEqual([
        { asset_type_key: 'server', key: 'hostname', name: 'hostname', type: 'unique_key', required: true, options: null, currency: null, min: null, max: null, position: 0 },
        { asset_type_key: 'server', key: 'environment', name: 'environment', type: 'select', required: false, options: ['dev', 'staging', 'prod'], currency: null, min: null, max: null, position: 1 },
        { asset_type_key: 'server', key: 'cpu_count', name: 'cpu_count', type: 'integer', required: false, options: null, currency: null, min: 1, max: 256, position: 2 },
        { asset_type_key: 'server', key: 'owner', name: 'owner', type: 'text', required: false, options: null, currency: null, min: null, max: null, position: 3 },
        { asset_type_key: 'application', key: 'code', name: 'code', type: 'unique_key', required: false, options: null, currency: null, min: null, max: null, position: 0 },
      ])
      expect(await rows('SELECT key, name, source_asset_type_keys, target_asset_type_keys, position FROM relationship_types WHERE org_id = $1 ORDER BY position', orgId)).toEqual([
        { key: 'runs_on', name: 'Runs on', source_asset_type_keys: ['application'], target_asset_type_keys: ['server'], position: 0 },
        { key: 'depends_on', name: 'depends_on', source_asset_type_keys: [], target_asset_type_keys: [], position: 1 },
      ])
    })

    it('applies the CONTRACT example as written, warning about the asset type its relationship type names but does not define', async () => {
      const setup = parseSetup(CONTRACT_EXAMPLE.replace('key: acme', 'key: contract'), 'contract.yaml', 'yaml')
      const warning = 'contract.yaml: metamodel.relationship_types[0].source_asset_type_keys[0]: asset type application is not defined; no asset can be the source of a runs_on relationship until it is'
      const first = await apply(store.db, setup)
      expect(first.changes).toContain('relationship type runs_on: created')
      expect(first.warnings).toEqual([warning])
      const again = await apply(store.db, setup)
      expect(again).toEqual({ organization: { key: 'contract', id: first.organization.id, created: false }, changes: [], warnings: [warning] })
      const defined = structuredClone(setup)
      defined.metamodel!.asset_types!.push({ key: 'application', name: 'Application', description: null, properties: [] })
      expect((await apply(store.db, defined)).warnings).toEqual([])
    })

    it('changes nothing and reports nothing the second time', async () => {
      const first = await apply(store.db, baseSetup('twice'))
      const before = await snapshot(store.db, first.organization.id)
      const notify = vi.spyOn(store.db, 'notify')
      const second = await apply(store.db, baseSetup('twice'))
      expect(second).toEqual({ organization: { key: 'twice', id: first.organization.id, created: false }, changes: [], warnings: [] })
      expect(await snapshot(store.db, first.organization.id)).toEqual(before)
      expect(notify).not.toHaveBeenCalled()
      notify.mockRestore()
    })

    it('updates names, options, grants and users, and reports each change', async () => {
      const { organization } = await apply(store.db, baseSetup('update'))
      const s = baseSetup('update')
      s.organization = { key: 'update', name: 'Acme Corp', rate_limit: { requests: 100 }, ip_allowlist: ['10.0.0.0/8'] } as typeof s.organization
      s.access_domains[0]!.name = 'Information technology'
      s.roles[1]!.grants[0]!.level = 'edit'
      s.users[1]!.permission_type = 'Admin'
      Object.assign(s.users[1]!, { enabled: false })
      s.metamodel.asset_types[0]!.properties[1]!.options = ['dev', 'staging', 'prod', 'qa']
      s.metamodel.asset_types[0]!.properties[2]!.type = 'number'
      s.metamodel.relationship_types[1]!.name = 'Depends on'
      const notify = vi.spyOn(store.db, 'notify')
      const report = await apply(store.db, s)
      expect(report.changes).toEqual([
        'organization update: name Acme → Acme Corp',
        'organization update: rate_limit 6000 per 60 s → 100 per 60 s',
        'organization update: ip_allowlist [] → [10.0.0.0/8]',
        'access domain it: name IT → Information technology',
        'property server.environment: options [dev, staging, prod] → [dev, staging, prod, qa]',
        'property server.cpu_count: type integer → number',
        'relationship type depends_on: name depends_on → Depends on',
        'role it_editor: grants [{"access_domain_key":"it","asset_type_keys":["server"],"level":"delete"}] → [{"access_domain_key":"it","asset_type_keys":["server"],"level":"edit"}]',
        'user editor@acme.test: permission_type Editor → Admin',
        'user editor@acme.test: enabled true → false',
      ])
      expect(notify).toHaveBeenCalledWith('kbis_invalidate', organization.id)
      notify.mockRestore()
      expect(await metamodelVersion(store.db, organization.id)).toBe(2)
      expect(await rows('SELECT name, rate_limit_requests, ip_allowlist FROM organizations WHERE id = $1', organization.id)).toEqual([
        { name: 'Acme Corp', rate_limit_requests: 100, ip_allowlist: ['10.0.0.0/8'] },
      ])
      expect((await apply(store.db, s)).changes).toEqual([])
    })

    it('bumps metamodel_version only when the metamodel changes', async () => {
      const { organization } = await apply(store.db, baseSetup('version'))
      const s = baseSetup('version')
      s.organization.name = 'Renamed'
      s.access_domains.push({ key: 'hr', name: 'HR' })
      s.users[0]!.name = 'Boss'
      expect((await apply(store.db, s)).changes).toEqual([
        'organization version: name Acme → Renamed', 'access domain hr: created', 'user owner@acme.test: name Owner → Boss',
      ])
      expect(await metamodelVersion(store.db, organization.id)).toBe(1)
      s.metamodel.asset_types[1]!.properties.push({ key: 'tier', type: 'text', description: 'Support tier' })
      expect((await apply(store.db, s)).changes).toEqual(['property application.tier: created'])
      expect(await metamodelVersion(store.db, organization.id)).toBe(2)
    })

    it('removes what a listed section no longer has, but never users', async () => {
      const { organization } = await apply(store.db, baseSetup('remove'))
      const orgId = organization.id
      const keyId = await givenApiKey(store.db, orgId, 'editor@acme.test', ['it_editor', 'all'])
      const s = baseSetup('remove')
      s.access_domains.pop()
      s.roles.pop()
      s.users = [s.users[0]!]
      s.metamodel.asset_types[0]!.properties.splice(3, 1)
      s.metamodel.asset_types.pop()
      s.metamodel.relationship_types = [s.metamodel.relationship_types[1]!]
      expect((await apply(store.db, s)).changes).toEqual([
        'access domain finance: removed',
        'asset type application: removed',
        'property server.owner: removed',
        'relationship type runs_on: removed',
        'role it_editor: removed (revoked from 1 user(s) and 1 API key(s))',
      ])
      expect(await rows('SELECT email, role_keys FROM users WHERE org_id = $1 ORDER BY email', orgId)).toEqual([
        { email: 'editor@acme.test', role_keys: [] }, { email: 'owner@acme.test', role_keys: ['all'] },
      ])
      expect(await rows('SELECT id, role_keys FROM api_keys WHERE org_id = $1', orgId)).toEqual([{ id: keyId, role_keys: ['all'] }])
      expect(await rows('SELECT key FROM asset_types WHERE org_id = $1', orgId)).toEqual([{ key: 'server' }])
      expect((await apply(store.db, s)).changes).toEqual([])
    })

    it('refuses to remove the last role of an API key (a key has one or more roles), writing nothing', async () => {
      const { organization } = await apply(store.db, baseSetup('last_role'))
      const orgId = organization.id
      const only = await givenApiKey(store.db, orgId, 'editor@acme.test', ['it_editor'])
      const both = await givenApiKey(store.db, orgId, 'owner@acme.test', ['it_editor', 'all'])
      const keys = () => rows('SELECT id, role_keys FROM api_keys WHERE org_id = $1 ORDER BY id', orgId)
      const before = { ...(await snapshot(store.db, orgId)), keys: await keys() }
      const s = baseSetup('last_role')
      s.roles.pop()
      s.users = [s.users[0]!]
      expect(await failure(apply(store.db, s))).toBe(
        `SetupError: organization last_role: cannot remove role it_editor: it is the only role of API key "test" (kbis_p_${only}, of editor@acme.test); give the key another role or revoke it first (kbis keys revoke)`,
      )
      expect({ ...(await snapshot(store.db, orgId)), keys: await keys() }).toEqual(before)
      // Removed one after the other by one file, two roles can be a key's last as well.
      await store.db.query('DELETE FROM api_keys WHERE id = $1', [only])
      const none = baseSetup('last_role')
      none.roles = [{ key: 'other', name: 'Other', grants: [] }]
      none.users = none.users.map((u) => ({ ...u, role_keys: [] }))
      expect(await failure(apply(store.db, none))).toBe(
        `SetupError: organization last_role: cannot remove role it_editor: it is the only role of API key "test" (kbis_p_${both}, of owner@acme.test); give the key another role or revoke it first (kbis keys revoke)`,
      )
      expect(await keys()).toEqual([{ id: both, role_keys: ['it_editor', 'all'] }])
      // With the key given another role first, the removal goes through.
      await store.db.query("UPDATE api_keys SET role_keys = '{all}' WHERE id = $1", [both])
      expect((await apply(store.db, s)).changes).toEqual(['role it_editor: removed (revoked from 1 user(s) and 0 API key(s))'])
    })

    it('leaves sections the file does not list untouched', async () => {
      const { organization } = await apply(store.db, baseSetup('partial'))
      const before = await snapshot(store.db, organization.id)
      expect((await apply(store.db, { organization: { key: 'partial', name: 'Acme' } })).changes).toEqual([])
      expect(await snapshot(store.db, organization.id)).toEqual(before)
      const report = await apply(store.db, { organization: { key: 'partial', name: 'Acme' }, metamodel: { relationship_types: [] } })
      expect(report.changes).toEqual(['relationship type runs_on: removed', 'relationship type depends_on: removed'])
      expect(await rows('SELECT count(*)::int AS n FROM asset_types WHERE org_id = $1', organization.id)).toEqual([{ n: 2 }])
    })

    it('resolves names against the store when the file does not list their section', async () => {
      await apply(store.db, baseSetup('refs'))
      const roles = [{ key: 'auditor', grants: [{ access_domain_key: 'finance', asset_type_keys: ['server'], level: 'view' }] }]
      const users = [{ email: 'audit@acme.test', name: 'Audit', permission_type: 'Viewer', role_keys: ['auditor'] }]
      const ok = await apply(store.db, { organization: { key: 'refs', name: 'Acme' }, roles, users })
      expect(ok.changes).toEqual(['role all: removed (revoked from 1 user(s) and 0 API key(s))', 'role it_editor: removed (revoked from 1 user(s) and 0 API key(s))', 'role auditor: created', 'user audit@acme.test: created'])
      const bad = [{ key: 'auditor', grants: [{ access_domain_key: 'hr', asset_type_keys: ['server'], level: 'view' }] }]
      expect(await failure(apply(store.db, { organization: { key: 'refs', name: 'Acme' }, roles: bad }))).toBe(
        'SetupError: roles[0].grants[0].access_domain_key: unknown access domain hr',
      )
      expect(await failure(apply(store.db, { organization: { key: 'refs', name: 'Acme' }, users: [{ ...users[0], role_keys: ['boss'] }] }))).toBe(
        'SetupError: users[0].role_keys[0]: unknown role boss',
      )
    })

    it('reports reordering and keeps positions in file order', async () => {
      const { organization } = await apply(store.db, baseSetup('order'))
      const s = baseSetup('order')
      s.metamodel.asset_types.reverse()
      s.metamodel.asset_types[1]!.properties.reverse()
      expect((await apply(store.db, s)).changes).toEqual(['asset type server: properties reordered', 'asset types: reordered'])
      expect(await rows(`SELECT key, position FROM property_definitions WHERE org_id = $1 AND asset_type_key = 'server' ORDER BY position`, organization.id)).toEqual([
        { key: 'owner', position: 0 }, { key: 'cpu_count', position: 1 }, { key: 'environment', position: 2 }, { key: 'hostname', position: 3 },
      ])
      expect((await apply(store.db, s)).changes).toEqual([])
    })

    it('fills assets.unique_value when a unique_key property is added or changes, and clears it when none is left', async () => {
      const s = baseSetup('unique')
      const { organization } = await apply(store.db, s)
      const orgId = organization.id
      const a = await givenAsset(store.db, orgId, 'application', { code: 'crm', legacy_id: 'A-1' })
      const b = await givenAsset(store.db, orgId, 'application', { legacy_id: 'B-2' }, { archived: true })
      const unique = async () => rows(`SELECT id, unique_value FROM assets WHERE org_id = $1 AND asset_type_key = 'application' ORDER BY id`, orgId)
      s.metamodel.asset_types[1]!.properties = [{ key: 'code', type: 'text' }, { key: 'legacy_id', type: 'unique_key' }]
      expect((await apply(store.db, s)).changes).toEqual([
        'property application.code: type unique_key → text',
        'property application.legacy_id: created',
        'asset type application: unique_property_key code → legacy_id',
      ])
      expect(await unique()).toEqual([{ id: a, unique_value: 'A-1' }, { id: b, unique_value: 'B-2' }])
      s.metamodel.asset_types[1]!.properties = [{ key: 'code', type: 'text' }, { key: 'legacy_id', type: 'text' }]
      expect((await apply(store.db, s)).changes).toEqual([
        'property application.legacy_id: type unique_key → text',
        'asset type application: unique_property_key legacy_id → (none)',
      ])
      expect(await unique()).toEqual([{ id: a, unique_value: null }, { id: b, unique_value: null }])
    })
  })
}
