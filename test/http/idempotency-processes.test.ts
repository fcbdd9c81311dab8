import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { STORES, createTestStore, type TestStore } from '../helpers/stores.js'
import { startServerProcess, type ServerProcess } from '../helpers/processes.js'
import { applySetup } from '../../src/setup/apply.js'
import type { SetupFile } from '../../src/setup/schema.js'
import { createKeyFromCli } from '../../src/keys/cli.js'
import { ACME } from '../helpers/fixtures.js'

describe.runIf(STORES.includes('postgres'))('postgres: Idempotency-Key across two server processes', () => {
  let store: TestStore
  let servers: ServerProcess[] = []
  let key: string

  beforeAll(async () => {
    store = await createTestStore('postgres')
    await applySetup(store.db, ACME as unknown as SetupFile)
    key = (await createKeyFromCli(store.db, { org: 'acme', user: 'owner@acme.test', name: 'p', type: 'Editor', roles: ['all'] })).secret
    const env = { DATABASE_URL: process.env.TEST_DATABASE_URL, KBIS_TEST_SCHEMA: store.schema! }
    servers = await Promise.all([startServerProcess(env), startServerProcess(env)])
  }, 120_000)
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await store?.drop()
  })

  const post = async (base: string, body: unknown) => {
    const res = await fetch(`${base}/api/v1/bulk/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'nightly-2026-11-23' },
      body: JSON.stringify(body),
    })
    return { status: res.status, raw: await res.text(), replayed: res.headers.get('idempotent-replayed') }
  }

  it('runs duplicates sent to both processes at once exactly once', async () => {
    const [a, b] = servers.map((s) => s.address) as [string, string]
    const items = Array.from({ length: 2000 }, (_, i) => ({ asset_type_key: 'server', name: `proc-${i}`, properties: { hostname: `proc-${i}` } }))
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(i % 2 === 0 ? a : b, items)))
    const ran = answers.filter((r) => r.status === 201 && r.replayed === null)
    expect(ran).toHaveLength(1)
    for (const r of answers) {
      if (r === ran[0]) continue
      if (r.status === 409) expect(JSON.parse(r.raw).errors[0].code).toBe('idempotency_key_in_use')
      else expect(r).toEqual({ ...ran[0], replayed: 'true' })
    }
    const written = await store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM assets WHERE unique_value LIKE 'proc-%'`)
    expect(written.rows[0]!.n).toBe(2000)
    // Whichever process answers a later repeat replays the stored answer.
    expect(await post(b, items)).toEqual({ ...ran[0], replayed: 'true' })
    expect(await post(a, items)).toEqual({ ...ran[0], replayed: 'true' })
  }, 60_000)
})
