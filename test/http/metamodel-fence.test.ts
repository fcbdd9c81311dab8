import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import pg from 'pg'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/**
 * A write is validated against the metamodel its server has cached; `kbis apply` may change that
 * metamodel between the validation and the write's transaction. The write's transaction then
 * finds the metamodel version moved and writes nothing (503, Retry-After), and the next attempt is
 * validated against the new metamodel (src/metamodel/fence.ts). Found by an outside concurrency
 * audit: an apply removing the option `staging` while a bulk wrote `staging` left 3,000 live
 * assets holding it in 4 of 10 tries.
 */
for (const store of STORES) {
  describe(`${store}: writes and metamodel changes`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const server = (hostname: string, environment: string) => ({ asset_type_key: 'server', name: hostname, properties: { hostname, environment } })
    const staging = async () => (await t.request('GET', '/api/v1/assets?filter[properties.environment]=staging')).body.meta.page.total_items
    const CHANGED = {
      status: 503,
      body: { errors: [{ status: '503', code: 'service_unavailable', detail: 'the organization\'s metamodel changed while this request ran (kbis apply); nothing was written: send it again' }] },
    }

    /** What an apply removing `staging` writes, without its notification (the servers' caches keep the old metamodel). */
    const removeStaging = (sql: (text: string, values: unknown[]) => Promise<unknown>) => async () => {
      await sql("UPDATE property_definitions SET options = ARRAY['dev', 'prod'] WHERE org_id = $1 AND asset_type_key = 'server' AND key = 'environment'", [t.orgId])
      await sql('UPDATE organizations SET metamodel_version = metamodel_version + 1 WHERE id = $1', [t.orgId])
    }

    /** What an apply allowing `staging` again writes, with its notification (the cache reloads). */
    const allowStaging = async () => {
      await t.store.db.query("UPDATE property_definitions SET options = ARRAY['dev', 'staging', 'prod'] WHERE org_id = $1 AND asset_type_key = 'server' AND key = 'environment'", [t.orgId])
      await t.store.db.query('UPDATE organizations SET metamodel_version = metamodel_version + 1 WHERE id = $1', [t.orgId])
      t.app.metamodels.invalidate(t.orgId)
    }

    it('refuses a write validated against a metamodel changed since, writing nothing; the next is validated against the new one', async () => {
      await allowStaging()
      expect((await t.request('POST', '/api/v1/assets', { body: server('fence-0', 'staging') })).status).toBe(201)
      for (const [method, url, body] of [
        ['POST', '/api/v1/assets', server('fence-1', 'staging')],
        ['POST', '/api/v1/bulk/assets', [server('fence-2', 'dev'), server('fence-3', 'staging')]],
        ['PUT', '/api/v1/assets/server:hostname:fence-4', { name: 'fence-4', properties: { environment: 'staging' } }],
        ['PATCH', '/api/v1/assets/server:hostname:fence-0', { name: 'fence-0b', properties: { environment: 'staging' } }],
      ] as const) {
        await allowStaging()
        // The server caches the metamodel that allows staging (any request loads it)…
        const before = await t.request('GET', '/api/v1/assets?sort=name&page[size]=100')
        // …and an apply removes it without the server hearing of it yet.
        await t.store.db.transaction(async (tx) => removeStaging((text, values) => tx.query(text, values))())
        const res = await t.request(method, url, { body })
        expect({ what: `${method} ${url}`, status: res.status, body: res.body }).toEqual({ what: `${method} ${url}`, ...CHANGED })
        expect(res.headers['retry-after']).toBe('1')
        expect((await t.request('GET', '/api/v1/assets?sort=name&page[size]=100')).body).toEqual(before.body)
        // Sent again: validated against the metamodel without staging (the PATCH's asset holds it).
        const again = await t.request(method, url, { body })
        expect(again.status, `${method} ${url}: ${JSON.stringify(again.body)}`).toBe(422)
        expect(again.body.errors[0].detail).toMatch(/must be one of dev, prod/)
      }
      expect(await staging()).toBe(1)
    })

    if (store === 'postgres') {
      it('holds a write that reaches its transaction while an apply holds the organization, then refuses it when the apply changed the metamodel', async () => {
        // Back to staging allowed, and every server's cache told.
        await t.store.db.query("UPDATE property_definitions SET options = ARRAY['dev', 'staging', 'prod'] WHERE org_id = $1 AND asset_type_key = 'server' AND key = 'environment'", [t.orgId])
        await t.store.db.query('UPDATE organizations SET metamodel_version = metamodel_version + 1 WHERE id = $1', [t.orgId])
        t.app.metamodels.invalidate(t.orgId)
        expect((await t.request('POST', '/api/v1/assets', { body: server('fence-5', 'staging') })).status).toBe(201)
        const held = await staging()
        // An apply in progress: kbis apply locks the organization's row first (setup/state.ts lockOrganization).
        const apply = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL, options: `-c search_path=${t.store.schema}` })
        await apply.connect()
        try {
          await apply.query('BEGIN')
          await apply.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [t.orgId])
          const bulk = t.request('POST', '/api/v1/bulk/assets', { body: [server('fence-6', 'staging'), server('fence-7', 'prod')] })
          // The bulk waits for the organization's row: it has not written when the apply changes the metamodel.
          await new Promise((resolve) => setTimeout(resolve, 300))
          // Only the sessions this one blocks: pg_stat_activity lists the whole cluster, other files' tests included.
          const waiting = await apply.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)) AND query LIKE '%FOR KEY SHARE%'")
          expect(waiting.rows[0].n).toBe(1)
          await removeStaging((text, values) => apply.query(text, values))()
          await apply.query('COMMIT')
          const res = await bulk
          expect(res).toMatchObject(CHANGED)
          expect((await t.request('GET', '/api/v1/assets?filter[name]=fence-7')).body.data).toEqual([])
        } finally {
          await apply.end()
        }
        expect(await staging()).toBe(held)
      })
    }
  })
}
