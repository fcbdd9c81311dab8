import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ensureDefaultOrganization } from '../../../src/setup/bootstrap.js'
import { createTestStore, STORES, type TestStore } from '../../helpers/stores.js'
import { apply, baseSetup } from './helpers.js'

for (const kind of STORES) {
  describe(`${kind}: ensureDefaultOrganization`, () => {
    let store: TestStore
    beforeEach(async () => {
      store = await createTestStore(kind)
    })
    afterEach(async () => {
      await store.drop()
    })
    const rows = async (sql: string) => (await store.db.query(sql)).rows

    it('creates organization default, its Owner and role all on an empty store, once', async () => {
      const result = await ensureDefaultOrganization(store.db)
      if (!result.created) throw new Error('expected the default organization')
      expect(await rows('SELECT id, key, name, api_access, rate_limit_requests, rate_limit_window_seconds, ip_allowlist FROM organizations')).toEqual([
        { id: result.orgId, key: 'default', name: 'Default', api_access: true, rate_limit_requests: 6000, rate_limit_window_seconds: 60, ip_allowlist: [] },
      ])
      expect(await rows('SELECT org_id, id, email, name, permission_type, role_keys, enabled, sign_in_methods FROM users')).toEqual([
        { org_id: result.orgId, id: result.ownerUserId, email: 'owner@default.local', name: 'Owner', permission_type: 'Owner', role_keys: ['all'], enabled: true, sign_in_methods: ['password'] },
      ])
      expect(await rows('SELECT org_id, key, grants FROM roles')).toEqual([
        { org_id: result.orgId, key: 'all', grants: [{ access_domain_key: '*', asset_type_keys: ['*'], level: 'edit_access_domain' }] },
      ])
      expect(await rows('SELECT count(*)::int AS n FROM api_keys')).toEqual([{ n: 0 }])
      expect(await ensureDefaultOrganization(store.db)).toEqual({ created: false })
      expect(await rows('SELECT count(*)::int AS n FROM organizations')).toEqual([{ n: 1 }])
    })

    it('commits the organization with what the caller adds in its transaction, or neither (a start killed between them)', async () => {
      await expect(ensureDefaultOrganization(store.db, async (tx) => {
        await tx.query('SELECT 1')
        throw new Error('the process died here')
      })).rejects.toThrow('the process died here')
      expect(await rows('SELECT count(*)::int AS n FROM organizations')).toEqual([{ n: 0 }])
      expect(await rows('SELECT count(*)::int AS n FROM users')).toEqual([{ n: 0 }])
      // The next start finds an empty store and creates both.
      const seen: string[] = []
      const result = await ensureDefaultOrganization(store.db, async (_tx, created) => { seen.push(created.orgId) })
      expect(result.created && [result.orgId]).toEqual(seen)
    })

    it('does nothing when any organization exists', async () => {
      await apply(store.db, baseSetup('acme'))
      expect(await ensureDefaultOrganization(store.db)).toEqual({ created: false })
      expect(await rows('SELECT key FROM organizations')).toEqual([{ key: 'acme' }])
    })

    it('creates it once when two starts race', async () => {
      const results = await Promise.all([ensureDefaultOrganization(store.db), ensureDefaultOrganization(store.db)])
      expect(results.filter((r) => r.created)).toHaveLength(1)
      expect(await rows('SELECT count(*)::int AS n FROM organizations')).toEqual([{ n: 1 }])
    })

    it('leaves an organization that `kbis apply` can then adopt by key', async () => {
      const result = await ensureDefaultOrganization(store.db)
      const report = await apply(store.db, { organization: { key: 'default', name: 'Default' } })
      expect(report).toEqual({ organization: { key: 'default', id: result.created ? result.orgId : '', created: false }, changes: [], warnings: [] })
    })
  })
}
