import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

/**
 * CONTRACT §2: an archived asset is gone from every V1 write. A relationship whose end is
 * archived while it is being created is refused as if the end were unknown (the other order, the
 * archive after the create, archives the relationship with its end).
 */
describe.runIf(STORES.includes('postgres'))('postgres: a relationship created while one of its ends is archived', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await createTestApp('postgres')
  })
  afterAll(async () => t.close())

  const asset = async (body: object) => (await t.request('POST', '/api/v1/assets', { body })).body.data.id as string

  for (const [label, send] of [
    ['POST /relationships', (s: string, target: string) => t.request('POST', '/api/v1/relationships', { body: { relationship_type_key: 'runs_on', source_asset_id: s, target_asset_id: target } })],
    ['POST /bulk/relationships', (s: string, target: string) => t.request('POST', '/api/v1/bulk/relationships', { body: [{ relationship_type_key: 'runs_on', source_asset_id: s, target_asset_id: target }] })],
  ] as const) {
    it(`${label}: the archive committed first, so the create is refused (422, end not found), and nothing is written`, async () => {
      const s = await asset({ asset_type_key: 'application', name: `race-app-${label}`, access_domain_key: 'it', properties: { code: `race-${label.length}` } })
      const target = await asset({ asset_type_key: 'server', name: `race-srv-${label}`, access_domain_key: 'it', properties: { hostname: `race-${label.length}` } })
      let created!: ReturnType<typeof send>
      await t.store.db.transaction(async (tx) => {
        // Holds the source: the create's foreign-key check on it waits, after its own checks read both ends live.
        await tx.query('SELECT 1 FROM assets WHERE id = $1 FOR UPDATE', [s])
        created = send(s, target)
        await new Promise((r) => setTimeout(r, 300))
        // The archive of the target commits while the create waits.
        expect((await t.request('DELETE', `/api/v1/assets/${target}`)).status).toBe(204)
      })
      const res = await created
      expect(res.status, JSON.stringify(res.body)).toBe(422)
      expect(JSON.stringify(res.body)).toContain(`${target} not found`)
      expect((await t.store.db.query('SELECT count(*)::int AS n FROM relationships WHERE target_asset_id = $1', [target])).rows[0]).toEqual({ n: 0 })
    })
  }

  it('the create first: the archive waits for it (its foreign-key locks) and then archives the relationship with its end', async () => {
    const s = await asset({ asset_type_key: 'application', name: 'order-app', access_domain_key: 'it', properties: { code: 'order-app' } })
    const target = await asset({ asset_type_key: 'server', name: 'order-srv', access_domain_key: 'it', properties: { hostname: 'order-srv' } })
    let relationship = ''
    let archived!: Promise<{ status: number }>
    await t.store.db.transaction(async (tx) => {
      // The create holds its ends (foreign keys) until it commits; here, its transaction.
      const ins = await tx.query<{ id: string }>(`INSERT INTO relationships (org_id, id, relationship_type_key, source_asset_id, target_asset_id, created_at, updated_at)
        SELECT org_id, gen_random_uuid(), 'runs_on', $1, $2, now(), now() FROM assets WHERE id = $1 RETURNING id`, [s, target])
      relationship = ins.rows[0]!.id
      archived = t.request('DELETE', `/api/v1/assets/${target}`)
      await new Promise((r) => setTimeout(r, 300))
      // The archive's statement, blocked by this transaction (pg_stat_activity lists the whole cluster, other files' tests included).
      const waiting = await tx.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)) AND query LIKE 'WITH locked AS%'`)
      expect(waiting.rows[0]!.n).toBe(1)
    })
    expect((await archived).status).toBe(204)
    expect((await t.store.db.query('SELECT count(*)::int AS n FROM relationships WHERE id = $1', [relationship])).rows[0]).toEqual({ n: 1 })
  })
})
