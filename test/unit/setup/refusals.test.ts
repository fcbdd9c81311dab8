import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestStore, STORES, type TestStore } from '../../helpers/stores.js'
import { apply, baseSetup, failure, givenAsset, givenRelationship, snapshot, type BaseSetup } from './helpers.js'

const FORBIDDEN = "a unique key (non-empty, at most 500 characters, without white space or any of : / ? # [ ] @ ! $ & ' ( ) * + , ; = \\)"

for (const kind of STORES) {
  describe(`${kind}: applySetup refuses metamodel changes that data contradicts`, () => {
    let store: TestStore
    let n = 0
    beforeAll(async () => {
      store = await createTestStore(kind)
    })
    afterAll(async () => {
      await store.drop()
    })

    /** A fresh organization; returns its id and a setup to change. */
    async function given(): Promise<{ orgId: string; org: string; s: BaseSetup }> {
      const org = `refuse${++n}`
      const report = await apply(store.db, baseSetup(org))
      return { orgId: report.organization.id, org, s: baseSetup(org) }
    }

    /** Applies `s`, expecting `message` and no write at all. */
    async function expectRefused(orgId: string, s: unknown, message: string): Promise<void> {
      const before = await snapshot(store.db, orgId)
      expect(await failure(apply(store.db, s))).toBe(`SetupError: ${message}`)
      expect(await snapshot(store.db, orgId)).toEqual(before)
    }

    const server = (s: BaseSetup) => s.metamodel.asset_types[0]!
    const prop = (s: BaseSetup, key: string) => server(s).properties.find((p) => p.key === key)!

    it('removing an asset type that live assets have', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'application', { code: 'crm' })
      await givenAsset(store.db, orgId, 'application', { code: 'erp' })
      s.metamodel.asset_types.pop()
      s.metamodel.relationship_types.shift()
      await expectRefused(orgId, s, `organization ${org}: cannot remove asset type application: 2 assets have this type`)
    })

    it('removing an asset type that only archived assets have', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'application', { code: 'crm' }, { archived: true })
      s.metamodel.asset_types.pop()
      s.metamodel.relationship_types.shift()
      await expectRefused(orgId, s, `organization ${org}: cannot remove asset type application: 1 asset has this type (1 of them archived)`)
    })

    it('removing an asset type that a relationship type kept from the store names', async () => {
      const { orgId, org, s } = await given()
      s.metamodel.asset_types.pop()
      const withoutRelationshipTypes = { ...s, metamodel: { asset_types: s.metamodel.asset_types } }
      await expectRefused(orgId, withoutRelationshipTypes,
        `organization ${org}: cannot remove asset type application: relationship type runs_on, not listed in the file, names it`)
    })

    it('removing an asset type that a role kept from the store grants on', async () => {
      const { orgId, org, s } = await given()
      s.metamodel.asset_types.shift()
      s.metamodel.relationship_types = []
      const { roles: _, ...withoutRoles } = s
      await expectRefused(orgId, withoutRoles,
        `organization ${org}: cannot remove asset type server: role it_editor, not listed in the file, grants on it`)
    })

    it('removing an asset type that a role in the file still names', async () => {
      const { orgId, s } = await given()
      s.metamodel.asset_types.shift()
      s.metamodel.relationship_types = []
      await expectRefused(orgId, s, 'roles[1].grants[0].asset_type_keys[0]: unknown asset type server')
    })

    it('removing a property that live assets have a value for (archived values do not count)', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 'ann' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', owner: 'bob' }, { archived: true })
      await givenAsset(store.db, orgId, 'server', { hostname: 'c', owner: null })
      server(s).properties.splice(3, 1)
      await expectRefused(orgId, s, `organization ${org}: cannot remove property server.owner: 1 live asset has a value`)
    })

    it('changing a type when values do not fit it', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: '12' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', owner: 'bob' })
      prop(s, 'owner').type = 'number'
      await expectRefused(orgId, s, `organization ${org}: cannot change the type of property server.owner from text to number: 2 live assets have a value that is not a number`)
      prop(s, 'owner').type = 'long_text'
      expect((await apply(store.db, s)).changes).toEqual(['property server.owner: type text → long_text'])
    })

    it('changing number to integer while a value has a fraction', async () => {
      const { orgId, org, s } = await given()
      prop(s, 'cpu_count').type = 'number'
      await apply(store.db, s)
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', cpu_count: 2.5 })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', cpu_count: 4 })
      prop(s, 'cpu_count').type = 'integer'
      await expectRefused(orgId, s, `organization ${org}: cannot change the type of property server.cpu_count from number to integer: 1 live asset has a value that is not an integer from 1 to 256`)
    })

    it('changing text to number when every value is a number', async () => {
      const { orgId, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 12 })
      prop(s, 'owner').type = 'number'
      expect((await apply(store.db, s)).changes).toEqual(['property server.owner: type text → number'])
    })

    it('removing a select option still used', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', environment: 'staging' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', environment: 'prod' })
      prop(s, 'environment').options = ['dev', 'prod']
      await expectRefused(orgId, s, `organization ${org}: cannot remove option staging from property server.environment: 1 live asset has a value that is not one of dev, prod`)
    })

    it('changing select options, none removed, while a live value is outside them', async () => {
      const { orgId, org, s } = await given()
      // A value outside the options gets in through the archive: its option is removed while the
      // asset is archived (archived values are not checked), then the asset is restored.
      const id = await givenAsset(store.db, orgId, 'server', { hostname: 'a', environment: 'staging' }, { archived: true })
      prop(s, 'environment').options = ['prod', 'dev']
      await apply(store.db, s)
      await store.db.query('UPDATE assets SET archived_at = NULL WHERE org_id = $1 AND id = $2', [orgId, id])
      prop(s, 'environment').options = ['prod', 'qa', 'dev']
      await expectRefused(orgId, s, `organization ${org}: cannot change the options of property server.environment: 1 live asset has a value that is not one of prod, qa, dev`)
    })

    it('making a property required while live assets lack a value', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 'ann' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'c', owner: null })
      // An empty value is none (CONTRACT §4), which a required property may not hold.
      await givenAsset(store.db, orgId, 'server', { hostname: 'e', owner: '' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'f', owner: ' ' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'd' }, { archived: true })
      prop(s, 'owner').required = true
      await expectRefused(orgId, s, `organization ${org}: cannot make property server.owner required: 3 live assets have no value`)
    })

    it('adding a required property to a type with live assets', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'application', { code: 'crm' })
      s.metamodel.asset_types[1]!.properties.push({ key: 'tier', type: 'text', required: true })
      await expectRefused(orgId, s, `organization ${org}: cannot add required property application.tier: 1 live asset has no value`)
    })

    it('making a property the unique key while live values repeat', async () => {
      const { orgId, org, s } = await given()
      for (const owner of ['ann', 'ann', 'bob', 'bob', 'bob', 'cy']) await givenAsset(store.db, orgId, 'application', { code: owner })
      await givenAsset(store.db, orgId, 'server', { hostname: 'x', owner: 'ann' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'y', owner: 'ann' }, { archived: true })
      server(s).properties = [{ key: 'hostname', type: 'text' }, { key: 'owner', type: 'unique_key' }]
      expect((await apply(store.db, s)).changes.slice(-1)).toEqual(['asset type server: unique_property_key hostname → owner'])
      s.metamodel.asset_types[1]!.properties = [{ key: 'code', type: 'text' }, { key: 'name', type: 'unique_key' }]
      expect((await apply(store.db, s)).changes.slice(-1)).toEqual(['asset type application: unique_property_key code → name'])
      s.metamodel.asset_types[1]!.properties = [{ key: 'code', type: 'unique_key' }]
      await expectRefused(orgId, s, `organization ${org}: cannot make property application.code the unique key of asset type application: 5 live assets share 2 values`)
    })

    it('making a property the unique key while values have forbidden characters', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 'ann smith' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', owner: 'a/b' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'c', owner: '' })
      await givenAsset(store.db, orgId, 'server', { hostname: 'd', owner: 'ok-1.2_x~' })
      server(s).properties = [{ key: 'hostname', type: 'text' }, { key: 'owner', type: 'unique_key' }]
      await expectRefused(orgId, s, `organization ${org}: cannot change the type of property server.owner from text to unique_key: 3 live assets have a value that is not ${FORBIDDEN}`)
    })

    it('adding a required unique key while values are missing', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'application', { code: 'crm' })
      await givenAsset(store.db, orgId, 'application', {})
      s.metamodel.asset_types[1]!.properties = [{ key: 'code', type: 'unique_key', required: true }]
      await expectRefused(orgId, s, `organization ${org}: cannot make property application.code required: 1 live asset has no value`)
    })

    it('narrowing min and max below existing values', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', cpu_count: 64 })
      await givenAsset(store.db, orgId, 'server', { hostname: 'b', cpu_count: 8 })
      Object.assign(prop(s, 'cpu_count'), { min: 2, max: 32 })
      await expectRefused(orgId, s, `organization ${org}: cannot change the bounds of property server.cpu_count: 1 live asset has a value that is not an integer from 2 to 32`)
      Object.assign(prop(s, 'cpu_count'), { min: 8, max: 64 })
      expect((await apply(store.db, s)).changes).toEqual(['property server.cpu_count: min 1 → 8', 'property server.cpu_count: max 256 → 64'])
    })

    it('removing a relationship type that relationships use', async () => {
      const { orgId, org, s } = await given()
      const app = await givenAsset(store.db, orgId, 'application', { code: 'crm' })
      const srv = await givenAsset(store.db, orgId, 'server', { hostname: 'a' })
      await givenRelationship(store.db, orgId, 'runs_on', app, srv)
      s.metamodel.relationship_types.shift()
      await expectRefused(orgId, s, `organization ${org}: cannot remove relationship type runs_on: 1 relationship has this type`)
    })

    it('narrowing the source or target asset types of a relationship type while relationships contradict it', async () => {
      const { orgId, org, s } = await given()
      const app = await givenAsset(store.db, orgId, 'application', { code: 'crm' })
      const srv = await givenAsset(store.db, orgId, 'server', { hostname: 'a' })
      await givenRelationship(store.db, orgId, 'depends_on', app, srv)
      await givenRelationship(store.db, orgId, 'depends_on', srv, srv)
      s.metamodel.relationship_types[1] = { key: 'depends_on', source_asset_type_keys: ['application'] }
      await expectRefused(orgId, s, `organization ${org}: cannot restrict the source asset types of relationship type depends_on to application: 1 relationship starts at an asset of another type`)
      s.metamodel.relationship_types[1] = { key: 'depends_on', target_asset_type_keys: ['application'] }
      await expectRefused(orgId, s, `organization ${org}: cannot restrict the target asset types of relationship type depends_on to application: 2 relationships end at an asset of another type`)
      s.metamodel.relationship_types[1] = { key: 'depends_on', source_asset_type_keys: ['application', 'server'], target_asset_type_keys: ['server'] }
      expect((await apply(store.db, s)).changes).toEqual([
        'relationship type depends_on: source_asset_type_keys [] → [application, server]',
        'relationship type depends_on: target_asset_type_keys [] → [server]',
      ])
    })

    it('removing an access domain that live assets are in', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a' }, { domain: 'finance' })
      s.access_domains.pop()
      await expectRefused(orgId, s, `organization ${org}: cannot remove access domain finance: 1 live asset is in it`)
    })

    it('removing an access domain that a role kept from the store grants on', async () => {
      const { orgId, org, s } = await given()
      s.access_domains.shift()
      const { roles: _, ...withoutRoles } = s
      await expectRefused(orgId, withoutRoles, `organization ${org}: cannot remove access domain it: role it_editor, not listed in the file, grants on it`)
    })

    it('refuses on the first contradiction even after earlier steps (the transaction writes nothing)', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 'ann' })
      s.organization.name = 'Renamed'
      s.access_domains.push({ key: 'hr', name: 'HR' })
      server(s).properties.splice(3, 1)
      await expectRefused(orgId, s, `organization ${org}: cannot remove property server.owner: 1 live asset has a value`)
    })

    it('names the file in refusals when the setup came from one', async () => {
      const { orgId, org, s } = await given()
      await givenAsset(store.db, orgId, 'server', { hostname: 'a', owner: 'ann' })
      server(s).properties.splice(3, 1)
      await expectRefused(orgId, { ...s, source: 'acme.yaml' }, `acme.yaml: organization ${org}: cannot remove property server.owner: 1 live asset has a value`)
    })
  })
}
