import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'

/** docs/configuration.md: "Two applies to the same organization run one after the other". */
for (const store of STORES) {
  describe(`${store}: kbis apply run several times at once`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    it('creates a new organization once: the others find it and update it, none fails', async () => {
      const setups = ['a', 'b', 'c', 'd'].map((domain) => ({ organization: { key: 'race' }, access_domains: [{ key: domain }] }) as unknown as SetupFile)
      const reports = await Promise.all(setups.map((setup) => applySetup(t.store.db, setup)))
      expect(reports.filter((r) => r.changes.includes('organization race: created'))).toHaveLength(1)
      const orgs = await t.store.db.query<{ n: number }>("SELECT count(*)::int AS n FROM organizations WHERE key = 'race'")
      expect(orgs.rows[0]!.n).toBe(1)
      const domains = await t.store.db.query<{ key: string }>(
        "SELECT d.key FROM access_domains d JOIN organizations o ON o.id = d.org_id WHERE o.key = 'race'")
      expect(domains.rows).toHaveLength(1)
    })
  })
}
