import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestStore, STORES, type TestStore } from '../helpers/stores.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import type { Db } from '../../src/store/db.js'

/**
 * CONTRACT §1: a deadlock or serialization failure inside the store is retried by the server,
 * never answered. Concurrent embedded relationship syncs over the same relationships, in opposite
 * orders, all answer 200.
 */
for (const store of STORES) {
  describe(`${store}: concurrent opposite-order syncs`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    const note = async (name: string): Promise<string> => {
      const res = await t.request('POST', '/api/v1/assets', { body: { asset_type_key: 'note', name } })
      expect(res.status).toBe(201)
      return res.body.data.id
    }
    const related = (ids: string[]) => ({ related_assets: ids.map((id) => ({ id })) })

    it('answers every sync 200 (none 503) and leaves a consistent set', async () => {
      const statuses: number[] = []
      for (let round = 0; round < 12; round++) {
        const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => note(`r${round}-${i}`)))
        const [x, y] = [ids[0]!, ids[1]!]
        const others = ids.slice(2)
        // Each links to the other and to every other note, both ways.
        const full = (self: string) => ({ outgoing: { depends_on: related(ids.filter((id) => id !== self)) }, incoming: { depends_on: related(ids.filter((id) => id !== self)) } })
        const bulkSet = await t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: x, relationships: full(x) }, { id: y, relationships: full(y) }] })
        expect(bulkSet.status).toBe(200)
        // Now, at once: X clears its pairs (deleting X→*, *→X), Y clears its own (deleting Y→*, *→Y),
        // and two bulk PATCHes of [X, Y] and [Y, X] replace the sets with overlapping ones.
        const answers = await Promise.all([
          t.request('PATCH', `/api/v1/assets/${x}`, { body: { relationships: { outgoing: { depends_on: related([]) }, incoming: { depends_on: related(others) } } } }),
          t.request('PATCH', `/api/v1/assets/${y}`, { body: { relationships: { outgoing: { depends_on: related(others) }, incoming: { depends_on: related([]) } } } }),
          t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: x, relationships: { outgoing: { depends_on: related([y]) } } }, { id: y, relationships: { outgoing: { depends_on: related([x]) } } }] }),
          t.request('PATCH', '/api/v1/bulk/assets', { body: [{ id: y, relationships: { incoming: { depends_on: related(others.slice(1)) } } }, { id: x, relationships: { incoming: { depends_on: related(others.slice(2)) } } }] }),
        ])
        for (const res of answers) {
          statuses.push(res.status)
          expect(res.status, JSON.stringify(res.body)).toBe(200)
        }
        // The store holds at most one relationship per (type, source, target): no duplicate survived the races.
        const rels = await t.request('POST', '/api/v1/search/relationships', { body: { filter: { field: 'source_asset_id', operator: 'in', value: ids }, page: { size: 100 } } })
        const keys = rels.body.data.map((r: { source_asset_id: string; target_asset_id: string }) => `${r.source_asset_id}>${r.target_asset_id}`)
        expect(new Set(keys).size).toBe(keys.length)
      }
      expect(statuses.every((s) => s === 200)).toBe(true)
    })
  })
}

for (const store of STORES) {
  describe(`${store}: concurrent upserts of the same assets in different orders`, () => {
    let t: TestApp
    beforeAll(async () => {
      t = await createTestApp(store)
    })
    afterAll(async () => t.close())

    it('answers every PUT /bulk/assets 200, promptly: the updates take their row locks in one order', async () => {
      const keys = Array.from({ length: 30 }, (_, j) => `server:hostname:dl-${j}`)
      const items = (order: string[], owner: string) => order.map((id) => ({ id, name: id.split(':')[2], access_domain_key: 'it', properties: { owner } }))
      expect((await t.request('PUT', '/api/v1/bulk/assets', { body: items(keys, 'init') })).status).toBe(200)
      const reversed = [...keys].reverse()
      const shuffled = keys.map((k, j) => keys[(j * 7) % keys.length]!)
      const started = Date.now()
      const answers = await Promise.all(Array.from({ length: 12 }, (_, k) =>
        t.request('PUT', '/api/v1/bulk/assets', { body: items([keys, reversed, shuffled][k % 3]!, `w${k}`) })))
      for (const res of answers) expect(res.status, JSON.stringify(res.body)).toBe(200)
      // Deadlocks were broken by PostgreSQL's detector, one a second (deadlock_timeout), then retried.
      expect(Date.now() - started).toBeLessThan(5_000)
      const owners = new Set((await t.request('GET', '/api/v1/assets?filter[asset_type_key]=server&page[size]=100')).body.data
        .filter((a: { name: string }) => a.name.startsWith('dl-')).map((a: { properties: { owner: string } }) => a.properties.owner))
      // All or nothing, each: the thirty assets hold one request's values.
      expect(owners.size).toBe(1)
    })
  })
}

describe.runIf(STORES.includes('postgres'))('postgres: the transaction helper retries deadlocks', () => {
  // A store without an app: the retry counter is the store's, and an app's background work (the
  // event relay's transactions) would count there too.
  let store: TestStore
  beforeAll(async () => {
    store = await createTestStore('postgres')
    await store.db.query('CREATE TABLE deadlock_probe (id int PRIMARY KEY, v int NOT NULL)')
    await store.db.query('INSERT INTO deadlock_probe VALUES (1, 0), (2, 0)')
  })
  afterAll(async () => store.drop())

  it('runs both parties of a real deadlock to completion: one is retried, both commit', async () => {
    const db: Db & { transientRetries?: number } = store.db
    const before = db.transientRetries ?? 0
    // A barrier both first attempts wait at, holding their first row lock: a certain deadlock.
    let arrived = 0
    let open!: () => void
    const barrier = new Promise<void>((resolve) => { open = resolve })
    const attempts = [0, 0]
    const party = (i: number, first: number, second: number) =>
      db.transaction(async (tx) => {
        attempts[i]!++
        await tx.query('UPDATE deadlock_probe SET v = v + 1 WHERE id = $1', [first])
        if (attempts[i] === 1) {
          if (++arrived === 2) open()
          await barrier
        }
        await tx.query('UPDATE deadlock_probe SET v = v + 1 WHERE id = $1', [second])
        return i
      })
    await expect(Promise.all([party(0, 1, 2), party(1, 2, 1)])).resolves.toEqual([0, 1])
    expect((db.transientRetries ?? 0) - before).toBe(1)
    expect(attempts.sort()).toEqual([1, 2])
    const rows = await db.query<{ id: number; v: number }>('SELECT id, v FROM deadlock_probe ORDER BY id')
    expect(rows.rows).toEqual([{ id: 1, v: 2 }, { id: 2, v: 2 }])
  })
})
